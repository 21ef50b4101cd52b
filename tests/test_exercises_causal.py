"""Exercise 2: the causality checker on gptlib's GPT, on a GPT written from scratch, and on the
typical broken masks; the learner's own dependency map against a causal and an unmasked model."""

import pytest
import torch

from gptlib import COURSE_CONFIG, GPT, GPTConfig
from gptlib.exercises import check_causality, check_dependency_map, solutions
from gptlib.exercises.result import ERROR, FAILED
from tests.support.scratch_gpt import ScratchGPT

pytestmark = pytest.mark.usefixtures("one_thread")


def test_causal_models_pass_gptlib_and_from_scratch():
    r = check_causality(GPT(COURSE_CONFIG))
    assert r.passed and "depends on x_0..x_t only" in r.message
    assert check_causality(ScratchGPT()).passed
    assert check_causality(ScratchGPT(tied=True, qkv_bias=True), T=12).passed


def test_a_plain_function_and_a_tuple_output_are_accepted():
    model = ScratchGPT()
    assert check_causality(lambda idx: model(idx)).passed
    assert check_causality(lambda idx: (model(idx), None)).passed


def test_a_causal_model_that_ignores_earlier_tokens_passes_with_a_note():
    r = check_causality(lambda idx: torch.nn.functional.one_hot(idx, 13).float())  # Z_t sees x_t alone
    assert r.passed and any("some Z_t ignore an earlier x_s" in line for line in r.details)
    assert "some Z_t ignore" not in repr(check_causality(ScratchGPT()))


def test_an_unmasked_model_is_caught_at_the_first_pair():
    r = check_causality(GPT(GPTConfig(V=13, T_max=8, d=16, H=2, L=2, causal=False)))
    assert r.status == FAILED and "Z_0 depends on the later token x_1" in r.message
    assert "every later token leaks" in r.message
    assert any("!" in line for line in r.details)


def test_a_mask_off_by_one_that_sees_t_plus_1_is_named():
    r = check_causality(ScratchGPT(mask_diagonal=2, L=1))
    assert r.status == FAILED and "Z_0 depends on the later token x_1" in r.message and "off by one" in r.message


def test_a_mask_that_hides_the_token_itself():
    r = check_causality(ScratchGPT(mask_diagonal=0))  # softmax over an all -inf row: NaN at t = 0
    assert r.status == FAILED and "NaN" in r.message and "hides a token from itself" in r.message
    r = check_causality(ScratchGPT(mask_diagonal=0, fill=-1e9))  # row 0 then attends everywhere
    assert r.status == FAILED and "Z_0 depends on the later token x_1" in r.message


def test_a_leak_through_one_head_of_one_layer_is_caught():
    for layer in (0, 1):
        r = check_causality(ScratchGPT(leak=(layer, 2)))
        assert r.status == FAILED and "Z_0 depends on the later token x_1" in r.message, layer
    r = check_causality(ScratchGPT(leak=(1, 0, 1, 2, 3)))  # a whole layer unmasked
    assert r.status == FAILED and "Z_0 depends on the later token x_1" in r.message


def test_a_leak_outside_attention_is_caught_where_it_is():
    model = ScratchGPT()
    r = check_causality(lambda idx: model(idx) + 0.01 * idx[:, -1:, None])  # every row sees the last token
    assert r.status == FAILED and "Z_0 depends on the later token x_7" in r.message and "7 of the 28" in r.message


def test_a_model_that_mixes_the_batch_is_refused_before_causality():
    r = check_causality(ScratchGPT(mix_batch=True))
    assert r.status == FAILED and "other sequences share its batch" in r.message


def test_dropout_in_training_mode_does_not_fake_a_leak_and_the_mode_is_restored():
    model = ScratchGPT()
    model.blocks[0].mlp.append(torch.nn.Dropout(0.5))
    model.train()
    assert check_causality(model).passed
    assert model.training


def test_wrong_shapes_and_crashes_are_reported():
    model = ScratchGPT()
    r = check_causality(lambda idx: model(idx)[:, -1:, :])  # nanoGPT's inference shortcut: last position only
    assert r.status == FAILED and "one row per position" in r.message
    r = check_causality(lambda idx: idx @ idx)
    assert r.status == ERROR and "RuntimeError" in r.message


def test_a_length_without_a_future_is_reported_not_raised():
    r = check_causality(ScratchGPT(), T=1)
    assert r.status == ERROR
    assert r.message == "the checker could not use your answer: ValueError: T must be an integer >= 2, got 1"


def test_a_gpt_too_short_for_a_future_is_refused_after_T_is_cut_to_T_max():
    r = check_causality(GPT(GPTConfig(V=13, T_max=1, d=16, H=2, L=1)))  # T = 8 is cut to T_max = 1
    assert r.status == ERROR
    assert r.message == ("the checker could not use your answer: "
                         "ValueError: T (cut to the model's T_max = 1) must be an integer >= 2, got 1")
    r = check_causality(GPT(GPTConfig(V=13, T_max=2, d=16, H=2, L=1)))  # T = 8 cut to 2 still has a future
    assert r.passed and "perturbing each of the 2 tokens" in r.message


@pytest.mark.parametrize("T", ["8", 8.0])
def test_a_length_that_is_not_an_integer_is_refused_by_the_checks_rule(T):
    for model in (ScratchGPT(), GPT(GPTConfig(V=13, T_max=4, d=16, H=2, L=1))):  # T is checked before it is cut
        r = check_causality(model, T=T)
        assert r.status == ERROR
        assert r.message == f"the checker could not use your answer: ValueError: T must be an integer, got {T!r}"


def test_typical_dependency_maps_fail():
    r = check_dependency_map(lambda model, idx: solutions.dependency_map(model, idx).T)
    assert r.status == FAILED and "transposed" in r.message
    r = check_dependency_map(lambda model, idx: torch.zeros(len(idx), len(idx)))
    assert r.status == FAILED and "no dependence at all" in r.message
    r = check_dependency_map(lambda model, idx: torch.eye(len(idx)))
    assert r.status == FAILED and "only sees Z_t depend on x_t" in r.message
    r = check_dependency_map(lambda model, idx: solutions.dependency_map(model, idx).tril())  # always causal
    assert r.status == FAILED and "unmasked model" in r.message

