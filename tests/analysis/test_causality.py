"""Remark 5.1 / Exercise 2: the dependency maps of gptlib.analysis.causality, and that they catch a leak."""

import re

import pytest
import torch

from gptlib import GPT, encode
from gptlib.analysis.causality import future_dependence, gradient_map, perturbation_map, weakest_present_dependence

IDX = encode("First")  # T = 5


@pytest.fixture
def small(small_config):
    return small_config.replace(T_max=64, H=4)


def model_of(config):
    return GPT(config).eval()


@pytest.mark.parametrize(
    "changes",
    [{}, {"norm": "post"}, {"attn_only": True}, {"tie_weights": True}],
    ids=["pre-norm", "post-norm", "attn-only", "tied"],
)
def test_causal_models_have_exactly_lower_triangular_maps(small, changes):
    model = model_of(small.replace(**changes))
    for dependency_map in (perturbation_map(model, IDX), gradient_map(model, IDX)):
        assert dependency_map.shape == (len(IDX), len(IDX))
        assert future_dependence(dependency_map) <= 1e-6  # Exercise 2's tolerance; measured 0.0
        assert weakest_present_dependence(dependency_map) > 0  # Z_t does move with every x_s, s <= t


def test_unmasked_model_is_caught_by_both_maps(small):
    # The check can fail: without the causal mask every Z_t depends on every x_s.
    model = model_of(small.replace(causal=False))
    for dependency_map in (perturbation_map(model, IDX), gradient_map(model, IDX)):
        upper = dependency_map.triu(1)[torch.ones(len(IDX), len(IDX), dtype=torch.bool).triu(1)]
        assert (upper > 1e-4).all()
        assert future_dependence(dependency_map) > 1e-4


def test_perturbation_map_matches_one_sequence_at_a_time(small):
    # Independent reference: perturb one token, run that sequence alone, compare logits.
    model = model_of(small)
    dependency_map = perturbation_map(model, IDX, shift=5)
    with torch.no_grad():
        Z = model(IDX)  # (T, V)
        for s in range(len(IDX)):
            changed = IDX.clone()
            changed[s] = (changed[s] + 5) % small.V
            expected = (model(changed) - Z).abs().amax(dim=-1)  # (T,)
            torch.testing.assert_close(dependency_map[:, s], expected, atol=1e-5, rtol=1e-4)


def test_gradient_map_matches_one_logit_per_copy(small):
    # Reference without vmap: T V copies of X^(0) in one plain batch, copy (t, v) back-propagating Z_{t,v} alone.
    model = model_of(small.replace(causal=False))
    T, V = len(IDX), small.V
    X0 = (model.E[IDX] + model.P[:T]).detach()  # (T, d)
    X = X0.expand(T * V, -1, -1).clone().requires_grad_(True)  # (T V, T, d)
    copy = torch.arange(T * V)
    (J,) = torch.autograd.grad(model.forward_from_embeddings(X)[copy, copy // V, copy % V].sum(), X)
    expected = J.reshape(T, V, T, -1).pow(2).sum(dim=(1, 3)).sqrt()  # (T, T): [t, s]
    torch.testing.assert_close(gradient_map(model, IDX), expected)


def test_gradient_map_agrees_with_central_differences(small):
    # Column s of the map from finite differences of X^(0)_s, coordinate by coordinate.
    model = model_of(small).double()
    idx, s, eps = IDX[:5], 2, 1e-5
    X0 = (model.E[idx] + model.P[:5]).detach()  # (T, d)
    steps = torch.zeros(small.d, 5, small.d, dtype=torch.double)  # (d, T, d): one bump per coordinate
    steps[torch.arange(small.d), s, torch.arange(small.d)] = eps
    with torch.no_grad():
        fd = (model.forward_from_embeddings(X0 + steps) - model.forward_from_embeddings(X0 - steps)) / (2 * eps)
    expected = fd.pow(2).sum(dim=(0, 2)).sqrt()  # (T,): || dZ_t / dX^(0)_s ||_F
    torch.testing.assert_close(gradient_map(model, idx)[:, s], expected, atol=1e-7, rtol=1e-6)
    assert expected[:s].max() == 0  # rows before s do not move at all


def test_summaries_on_hand_made_maps():
    causal = torch.tensor([[1.0, 0.0], [2.0, 3.0]])
    leaky = torch.tensor([[1.0, 0.5], [2.0, 3.0]])
    assert future_dependence(causal) == 0.0 and future_dependence(leaky) == 0.5
    assert weakest_present_dependence(causal) == 1.0
    assert weakest_present_dependence(torch.tensor([[1.0, 0.0], [0.0, 3.0]])) == 0.0


def test_bad_input_is_refused(small):
    model = model_of(small)
    with pytest.raises(ValueError, match="one sequence"):
        perturbation_map(model, IDX[None])
    with pytest.raises(ValueError, match=re.escape("shift must be an integer in [1, 64], got 0")):
        perturbation_map(model, IDX, shift=0)
    with pytest.raises(ValueError, match=re.escape("shift must be an integer in [1, 64], got 65")):
        perturbation_map(model, IDX, shift=small.V)
    with pytest.raises(ValueError, match=re.escape("shift must be an integer in [1, 64], got True")):
        perturbation_map(model, IDX, shift=True)  # a bool is not a shift, though True == 1
    with pytest.raises(ValueError, match="T_max"):
        gradient_map(model, torch.zeros(small.T_max + 1, dtype=torch.long))
