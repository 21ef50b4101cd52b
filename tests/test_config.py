import dataclasses
import re
from fractions import Fraction

import numpy as np
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
        (dict(d=0), "d must be an integer >= 1, got 0"),
        (dict(L=-1), "L must be an integer >= 1, got -1"),
        (dict(V=2.5), "V must be an integer >= 1, got 2.5"),
        (dict(V=65.0), "V must be an integer >= 1, got 65.0"),
        (dict(T_max="64"), "T_max must be an integer >= 1, got '64'"),
        (dict(H=True), "H must be an integer >= 1, got True"),
        (dict(d_ff=0), "d_ff must be an integer >= 1, got 0"),
        (dict(norm="sandwich"), "norm must be one of"),
        (dict(norm=["pre"]), "norm must be one of"),
        (dict(ln_eps=-1.0), "ln_eps must be a finite number > 0, got -1.0"),
        (dict(ln_eps=float("nan")), "ln_eps must be a finite number > 0, got nan"),
        (dict(ln_eps=float("inf")), "ln_eps must be a finite number > 0, got inf"),
        (dict(ln_eps="1e-5"), "ln_eps must be a finite number > 0, got '1e-5'"),
        (dict(ln_eps=0), "ln_eps must be a finite number > 0, got 0.0"),
        (dict(ln_eps=-0.0), "ln_eps must be a finite number > 0, got 0.0"),
        (dict(init_std=0.0), "init_std must be a finite number > 0, got 0.0"),
        (dict(init_std=float("inf")), "init_std must be a finite number > 0, got inf"),
        (dict(init_std=float("nan")), "init_std must be a finite number > 0, got nan"),
        (dict(causal="False"), "causal must be True or False, got 'False'"),
        (dict(tie_weights=1), "tie_weights must be True or False, got 1"),
        (dict(attn_only=None), "attn_only must be True or False, got None"),
        (dict(attn_only=True, norm="post"), "attn_only=True needs norm='pre'"),
    ],
)
def test_invalid_configs_name_the_rule(changes, rule):
    with pytest.raises(ValueError, match=re.escape(rule)):
        GPTConfig(**changes)


def test_numbers_are_stored_in_plain_form():
    """numpy integers and floats are accepted as the numbers they are and stored as int and float,
    so a config always saves into a checkpoint."""
    config = GPTConfig(d=np.int64(64), H=np.int32(2), ln_eps=np.float32(0.5), init_std=Fraction(1, 50))
    assert (type(config.d), type(config.H), type(config.ln_eps), type(config.init_std)) == (int, int, float, float)
    assert config.d_head == 32 and config.ln_eps == 0.5 and config.init_std == 0.02


def test_replace_keeps_the_4d_default_in_step():
    assert COURSE_CONFIG.replace(d=64).d_ff == 256
    assert COURSE_CONFIG.replace(d=64, d_ff=100).d_ff == 100
    assert GPTConfig(d=64, d_ff=100).replace(d=32).d_ff == 100


def test_d_head_is_derived_from_d_and_h_and_never_stored():
    assert COURSE_CONFIG.replace(H=8).d_head == 16 and COURSE_CONFIG.replace(d=64).d_head == 16
    assert "d_head" not in {f.name for f in dataclasses.fields(GPTConfig)}
    with pytest.raises(TypeError, match="d_head"):
        COURSE_CONFIG.replace(d_head=8)
