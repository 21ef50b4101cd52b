import pytest

from gptlib import COURSE_CONFIG, GPTConfig


def test_course_config_is_the_lectures():
    c = COURSE_CONFIG
    assert (c.V, c.T_max, c.d, c.H, c.L) == (65, 64, 128, 4, 4)
    assert c.d_head == 32 and c.d_ff == 4 * 128
    assert c.norm == "pre" and not c.tie_weights and c.causal


@pytest.mark.parametrize(
    "changes, rule",
    [
        (dict(d=130, H=4), "H must divide d"),
        (dict(d=0), "d must be a positive integer"),
        (dict(L=-1), "L must be a positive integer"),
        (dict(V=2.5), "V must be a positive integer"),
        (dict(d_ff=0), "d_ff must be a positive integer"),
        (dict(norm="sandwich"), "norm must be one of"),
        (dict(ln_eps=-1.0), "ln_eps must be >= 0"),
    ],
)
def test_invalid_configs_name_the_rule(changes, rule):
    with pytest.raises(ValueError, match=rule):
        GPTConfig(**changes)


def test_replace_keeps_the_4d_default_in_step():
    assert COURSE_CONFIG.replace(d=64).d_ff == 256
    assert COURSE_CONFIG.replace(d=64, d_ff=100).d_ff == 100
    assert GPTConfig(d=64, d_ff=100).replace(d=32).d_ff == 100
