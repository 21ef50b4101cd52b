"""gptlib.analysis.cache: the Cache holds the lecture's intermediates of the model's own forward pass,
under the model's record names."""

import pytest
import torch

from gptlib import COURSE_CONFIG, GPT, GPTConfig, run_with_cache
from gptlib.analysis.cache import Cache, shape_table
from gptlib.model import BLOCK_RECORD_NAMES, FINAL_RECORD_NAMES, record_key


def test_cache_holds_the_lectures_intermediates(course_model):
    idx = torch.randint(0, 65, (2, 16))
    Z, cache = run_with_cache(course_model, idx)
    c = COURSE_CONFIG
    torch.testing.assert_close(cache.X(0), course_model.E[idx] + course_model.P[:16])
    for l in range(c.L):
        torch.testing.assert_close(cache.Y(l), cache.X(l) + cache.attn_write(l))
        torch.testing.assert_close(cache.X(l + 1), cache.Y(l) + cache.mlp_write(l))
        torch.testing.assert_close(cache.ln_1(l), course_model.blocks[l].ln_1(cache.X(l)))
    torch.testing.assert_close(cache.Z, Z)
    assert cache.n_layers == c.L
    with pytest.raises(ValueError, match="layers 0..3"):
        cache.A(4)


@pytest.mark.parametrize("config", [COURSE_CONFIG.replace(L=2), GPTConfig(L=2, attn_only=True)])
def test_the_record_holds_exactly_the_named_keys_and_cache_reads_each(config):
    """Every key the model records is one of model's names, and Cache has an accessor for it."""
    model = GPT(config).eval()
    record = {}
    model(torch.randint(0, config.V, (1, 5)), explicit=True, record=record)
    names = [n for n in BLOCK_RECORD_NAMES if not (config.attn_only and n in ("ln_2", "mlp_write"))]
    per_layer = [record_key(n, l) for l in range(config.L) for n in names]
    streams = [record_key("X", l) for l in range(config.L + 1)]
    assert sorted(record) == sorted(per_layer + streams + list(FINAL_RECORD_NAMES))
    cache = Cache(record)
    for l in range(config.L):
        for name in names:
            assert getattr(cache, name)(l) is record[record_key(name, l)]
    for name in FINAL_RECORD_NAMES:
        assert getattr(cache, name) is record[name]


def test_recording_on_the_fused_path_keeps_everything_but_A():
    model = GPT(COURSE_CONFIG.replace(L=1)).eval()
    fused, explicit = {}, {}
    idx = torch.randint(0, 65, (1, 6))
    model(idx, record=fused)
    model(idx, explicit=True, record=explicit)
    assert sorted(fused) == sorted(k for k in explicit if k != record_key("A", 0))


def test_a_missing_name_is_told_apart_from_a_missing_layer():
    model = GPT(GPTConfig(L=2, attn_only=True)).eval()
    _, cache = run_with_cache(model, torch.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match="no ln_2 in layer 0: this run recorded only X, ln_1, A, attn_write, Y there"):
        cache.ln_2(0)
    with pytest.raises(ValueError, match=r"no ln_1 for layer 2: this model has layers 0..1"):
        cache.ln_1(2)
    with pytest.raises(ValueError, match="layer l must be an integer, got True"):
        cache.X(True)
    fused = {}
    model(torch.tensor([1, 2, 3]), record=fused)
    with pytest.raises(ValueError, match="no A in layer 1: .* A needs the explicit path"):
        Cache(fused).A(1)


def test_shape_table_lines_up_symbol_shape_and_meaning():
    rows = [("x", torch.zeros(5, dtype=torch.long), "ids"), ("A^(0)", torch.zeros(1, 4, 5, 5), "one per head")]
    lines = shape_table(rows, width=8).splitlines()
    assert lines == ["x       (5,)              ids", "A^(0)   (1, 4, 5, 5)      one per head"]
    assert shape_table(rows).splitlines()[1].index("(1, 4") == 22  # the default symbol column
