"""Bring your own model: the report on a correct and on deliberately broken from-scratch GPTs."""

import re

import pytest

from gptlib import COURSE_CONFIG, GPT, theorem_5_2
from gptlib.exercises import check_own_model
from gptlib.exercises.counts import random_configs
from gptlib.exercises.own_model import expected_rows
from gptlib.exercises.result import FAILED, NOT_ATTEMPTED, PASSED
from tests.support.scratch_gpt import ScratchGPT

pytestmark = pytest.mark.usefixtures("one_thread")
SIZES = dict(V=17, T_max=16, d=32, L=2)


def parts(report):
    return {part.exercise: part for part in report.parts}


def test_a_correct_from_scratch_gpt_passes_every_check_row_by_row():
    report = check_own_model(ScratchGPT(), **SIZES)
    assert report.passed, report
    count = parts(report)["parameter count"]
    assert "every row equals Theorem 5.2" in count.message
    assert any(line.startswith("attention") for line in count.details)
    assert "all four checks pass" in repr(report)


def test_the_expected_rows_add_up_to_theorem_5_2():
    # own_model splits Theorem 5.2 by row and by matrices/vectors; its sum must stay the closed form.
    for c in random_configs(6, tied=None) + [COURSE_CONFIG.replace(d_ff=300)]:
        rows = expected_rows(c.V, c.T_max, c.d, c.L, c.d_ff, c.tie_weights)
        assert sum(m + v for m, v in rows.values()) == theorem_5_2(c), c


def test_gptlib_gpt_passes_and_a_tied_model_is_recognised():
    assert check_own_model(GPT(COURSE_CONFIG), V=65, T_max=64, d=128, L=4).passed
    report = check_own_model(ScratchGPT(tied=True), **SIZES)
    assert report.passed and "(tied" in parts(report)["parameter count"].details[0]


def test_query_key_value_biases_are_a_named_convention_not_a_failure():
    count = parts(check_own_model(ScratchGPT(qkv_bias=True), **SIZES))["parameter count"]
    assert count.status == PASSED and "your biases differ" in count.message
    assert any("biases on W_Q, W_K, W_V" in line for line in count.details)


def test_a_deliberately_broken_gpt_fails_each_check_it_breaks():
    broken = ScratchGPT(leak=(1, 0), positions=False, init_std=1.0, mix_batch=False)
    report = check_own_model(broken, **SIZES)
    found = parts(report)
    assert report.status == FAILED
    assert found["batch independence"].passed
    assert found["causality"].status == FAILED and "Z_0 depends on the later token x_1" in found["causality"].message
    count = found["parameter count"]
    assert count.status == FAILED and "embeddings: weight matrices -512 entries" in count.message
    assert found["initial loss"].status == FAILED and "not within 10%" in found["initial loss"].message
    assert "causality, parameter count, initial loss" in report.message


def test_a_plain_function_is_checked_except_its_parameter_count():
    model = ScratchGPT()
    found = parts(check_own_model(lambda idx: model(idx), **SIZES))
    assert found["causality"].passed and found["initial loss"].passed
    assert found["parameter count"].status == FAILED and "not an nn.Module" in found["parameter count"].message


def test_batch_mixing_is_reported():
    found = parts(check_own_model(ScratchGPT(mix_batch=True), **SIZES))
    assert found["batch independence"].status == FAILED and "BatchNorm" in found["batch independence"].message


def test_a_stub_model_is_not_attempted_and_bad_sizes_are_refused():
    def stub(idx):
        raise NotImplementedError

    report = check_own_model(stub, **SIZES)
    assert report.status == NOT_ATTEMPTED and report.parts == ()  # nothing to report on a stub
    with pytest.raises(ValueError, match=re.escape("d must be an integer >= 1, got 0")):
        check_own_model(ScratchGPT(), V=17, T_max=16, d=0, L=2)
    with pytest.raises(ValueError, match=re.escape("T (cut to the model's T_max = 1) must be an integer >= 2, got 1")):
        check_own_model(ScratchGPT(), V=17, T_max=1, d=8, L=2)  # T = min(T, T_max): one token has no future
    with pytest.raises(ValueError, match=re.escape("T must be an integer >= 2, got 1")):
        check_own_model(ScratchGPT(), **SIZES, T=1)
    for T in ("8", 8.0, 32.0):  # checked before it is cut to T_max = 16, not read by min()
        with pytest.raises(ValueError, match=re.escape(f"T must be an integer, got {T!r}")):
            check_own_model(ScratchGPT(), **SIZES, T=T)
