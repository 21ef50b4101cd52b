"""Exercise 2: the causality checker on gptlib's GPT, on a GPT written from scratch, and on the
typical broken masks; the learner's own dependency map against a causal and an unmasked model."""

import numpy as np
import pytest
import torch

from gptlib import COURSE_CONFIG, GPT, GPTConfig
from gptlib.exercises import check_causality, check_dependency_map
from gptlib.exercises.answers import solutions
from gptlib.exercises.causal import map_models
from gptlib.exercises.result import ERROR, FAILED
from tests.support.learner_gpts import EinsumGPT, ScratchGPT

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
    assert r.status == FAILED and "when the other sequences of its batch change" in r.message


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
    assert r.status == FAILED and "unmasked GPT" in r.message



@pytest.mark.parametrize(
    "model",
    [
        EinsumGPT(),  # raw Parameters, per-head tensors, einsum
        EinsumGPT(dtype=torch.float64, tied=True, qkv_bias=True),
        ScratchGPT(fused=False, sdpa=True),  # separate q, k, v and torch's fused causal kernel
        ScratchGPT(unembedding="head").double(),  # minGPT's name, in float64
        ScratchGPT(V=65, T_max=64, d=128, L=4, init_std=1.0),  # large init: rounding on logits ~30
        ScratchGPT(V=65, T_max=64, d=256, H=8, L=6, init_std=1.0),
    ],
)
def test_correct_models_in_other_styles_pass(model):
    r = check_causality(model)
    assert r.passed, r


def test_rounding_across_batch_shapes_is_not_read_as_batch_mixing():
    # Alone vs in a batch of three, such a model's logits can differ by ~1e-3 (other kernels sum
    # activations of std 1 in another order), once read as mixing; beside other companions in a
    # batch of the same shape, a row's arithmetic is the same and its logits do not move.
    for seed in range(3):
        torch.manual_seed(seed)
        model = ScratchGPT(V=65, T_max=64, d=128, L=4, init_std=1.0)
        x, companions = torch.randint(0, 65, (2, 3, 8))
        companions[1] = x[1]
        with torch.no_grad():
            assert (model(companions)[1] - model(x)[1]).abs().max() <= 1e-5 * (1 + model(x).abs().max())
        assert check_causality(model, seed=seed).passed


def test_positions_read_from_the_end_of_P_fail_when_tokens_are_appended():
    r = check_causality(ScratchGPT(positions="end"))  # x + P[-T:]: same-length perturbations see nothing
    assert r.status == FAILED and "when tokens are appended after it" in r.message and "P[-T:]" in r.message


@pytest.mark.parametrize("mix", ["mean", "layernorm"])
def test_mixing_over_positions_is_not_asserted_to_be_an_unmasked_attention(mix):
    r = check_causality(ScratchGPT(mix_positions=mix))
    assert r.status == FAILED and "every later token leaks into every row" in r.message
    assert "an operation over the T axis (a mean, sum, normalization" in r.message  # a candidate, as is attention
    assert "some attention is unmasked" not in r.message


@pytest.mark.parametrize("L", [2, 3, 4])
def test_a_mask_off_by_one_is_named_for_any_number_of_layers(L):
    for model in (ScratchGPT(mask_diagonal=2, L=L), ScratchGPT(mask_diagonal=2, L=L, init_std=0.3)):
        r = check_causality(model)
        assert r.status == FAILED and "mask off by one" in r.message and "none further" in r.message, r


def test_a_model_whose_T_max_is_below_the_tried_length_is_told_to_pass_a_shorter_T():
    model = ScratchGPT(T_max=5)
    r = check_causality(model)  # T = 8 > 5: nn.Embedding raises inside the learner's forward
    assert r.status == FAILED and "raises on 8 tokens but runs on 5" in r.message and "pass T=5" in r.message
    assert check_causality(model, T=5).passed


def test_a_class_instead_of_a_model_is_named():
    r = check_causality(ScratchGPT)
    assert r.status == FAILED and r.message == "ScratchGPT is a class, not a model: pass an instance, e.g. ScratchGPT(...)"


def _batched_map(model, idx):  # every perturbed copy in one batch, changes measured as a norm
    T, V = idx.shape[0], model.config.V
    batch = idx.repeat(T + 1, 1)
    batch[1 + torch.arange(T), torch.arange(T)] = (idx + 1) % V
    with torch.no_grad():
        Z = model(batch).double()  # (T+1, T, V)
    return (Z[1:] - Z[0]).norm(dim=-1).T  # (T, T): [t, s]


def _numpy_map(model, idx):  # a numpy array of booleans, a different replacement token
    base = model(idx).detach().numpy()
    M = np.zeros((len(idx), len(idx)), dtype=bool)
    for s in range(len(idx)):
        other = idx.clone()
        other[s] = (idx[s] + 5) % model.config.V
        M[:, s] = np.abs(model(other).detach().numpy() - base).max(axis=-1) > 0
    return M.astype(np.float32)


def _float64_map(model, idx):  # the model itself in float64, relative changes
    model = model.double()
    Z = model(idx)
    columns = []
    for s in range(len(idx)):
        other = idx.clone()
        other[s] = model.config.V - 1 - idx[s] if model.config.V - 1 != 2 * idx[s] else (idx[s] + 1) % model.config.V
        columns.append(((model(other) - Z).abs().amax(-1) / Z.abs().amax()).detach())
    return torch.stack(columns, dim=1)


@pytest.mark.parametrize("dependency_map", [solutions.dependency_map, _batched_map, _numpy_map, _float64_map])
def test_correct_dependency_maps_in_other_styles_pass(dependency_map):
    r = check_dependency_map(dependency_map)
    assert r.passed, r


def _perturbed_map(change):  # the solution's loop with another change of x_s (and later tokens)
    def dependency_map(model, idx):
        Z = model(idx)
        M = torch.zeros(len(idx), len(idx))
        for s in range(len(idx)):
            M[:, s] = (model(change(idx.clone(), s, model.config.V)) - Z).abs().amax(-1).detach()
        return M

    return dependency_map


def _set(idx, where, value):
    idx[where] = value
    return idx


def test_a_map_that_changes_x_s_and_every_later_token_fails():
    r = check_dependency_map(_perturbed_map(lambda idx, s, V: _set(idx, slice(s, None), (idx[s:] + 1) % V)))
    assert r.status == FAILED and "changes x_s and every later token together" in r.message


def test_a_map_that_replaces_x_s_by_token_0_fails_where_x_s_is_0():
    r = check_dependency_map(_perturbed_map(lambda idx, s, V: _set(idx, s, 0)))
    assert r.status == FAILED and "there x_s is token 0, so a change to token 0 changes nothing" in r.message


def test_a_map_that_takes_the_next_token_fails_where_tokens_repeat():
    r = check_dependency_map(_perturbed_map(lambda idx, s, V: _set(idx, s, idx[(s + 1) % len(idx)])))
    assert r.status == FAILED and "no dependence on x_s at s = [2]" in r.message


def test_a_map_whose_change_leaves_the_vocabulary_is_an_error():
    r = check_dependency_map(_perturbed_map(lambda idx, s, V: _set(idx, s, idx[s] + 1)))  # V - 1 + 1 = V
    assert r.status == ERROR and "got 13" in r.message


def test_the_models_a_map_is_tried_on_have_the_dependency_patterns_they_are_named_for():
    idx, T = torch.tensor([0, 12, 3, 3, 0, 7, 12, 1]), 8
    t, s = torch.arange(T)[:, None], torch.arange(T)[None, :]
    expected = {
        "causal GPT": s <= t,
        "unmasked GPT": torch.ones(T, T, dtype=torch.bool),
        "model whose Z_t reads x_t and x_(t-2) only": (s == t) | (s == t - 2),
        "model whose Z_t reads x_0 and x_t only": (s == t) | (s == 0),
    }
    for name, model in map_models().items():
        assert (solutions.dependency_map(model, idx) > 0).equal(expected[name]), name


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_models_pass_and_their_leaks_are_still_caught(dtype):
    assert check_causality(ScratchGPT().to(dtype)).passed
    r = check_causality(ScratchGPT(leak=(0, 1)).to(dtype))  # one unmasked head: 84 bfloat16 ulps would hide it
    assert r.status == FAILED and "Z_0 depends on the later token x_1" in r.message
    r = check_causality(ScratchGPT(positions="end").to(dtype))
    assert r.status == FAILED and "when tokens are appended after it" in r.message


def test_a_map_whose_changes_pile_up_fails_by_name():
    def in_place(model, idx):  # changes idx itself and never restores it
        Z = model(idx)
        M = torch.zeros(len(idx), len(idx))
        for s in range(len(idx)):
            idx[s] = (idx[s] + 1) % model.config.V
            M[:, s] = (model(idx) - Z).abs().amax(-1).detach()
        return M

    r = check_dependency_map(in_place)
    assert r.status == FAILED and "the changes pile up" in r.message
