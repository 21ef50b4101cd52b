"""Exercise 8: training FLOPs per token against FlopCounterMode, and where attention takes over."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from gptlib import GPT
from gptlib.analysis import cost
from gptlib.checking import FAILED, shifted_seeds, variant_points
from gptlib.exercises import check_attention_takeover, check_training_flops
from gptlib.exercises.answers import solutions
from gptlib.exercises.cost import TAKEOVER_CONFIGS, measured_crossing, measured_split, small_config
from gptlib.model import attention_matrices_formed

pytestmark = pytest.mark.usefixtures("one_thread")


def learner_flops(c, T, *, attention=True, embeddings=False, backward=True, flops_per_madd=2, causal_half=False,
                  unembedding=True, d_ff=None):
    """FLOPs per token the way a learner would write them, with switches for the typical slips."""
    d, L = c.d, c.L
    d_ff = c.d_ff if d_ff is None else d_ff
    weights = L * (4 * d * d + 2 * d * d_ff) + (d * c.V if unembedding else 0) + ((c.V + c.T_max) * d if embeddings else 0)
    madds = weights + ((L * T * d) // (2 if causal_half else 1) * 2 if attention else 0)  # Q K^T and A V: T d each
    return (3 if backward else 1) * flops_per_madd * madds


def test_flops_written_as_a_learner_would_pass():
    assert check_training_flops(learner_flops).passed


@pytest.mark.parametrize(
    "slip, message",
    [
        ({"attention": False}, "left out attention's scores and aggregation, the T^2 terms"),
        ({"embeddings": True}, "counted the embeddings E and P as matmuls"),
        ({"backward": False}, "forward pass only"),
        ({"flops_per_madd": 1}, "multiply-add as 1 FLOP"),
        ({"causal_half": True}, "halved the attention products"),
        ({"unembedding": False}, "left out the unembedding"),
        ({"d_ff": "4d"}, "assumed d_ff = 4d"),
    ],
)
def test_typical_flop_slips_are_named(slip, message):
    if slip.get("d_ff") == "4d":
        r = check_training_flops(lambda c, T: learner_flops(c, T, d_ff=4 * c.d))
    else:
        r = check_training_flops(lambda c, T: learner_flops(c, T, **slip))
    assert r.status == FAILED and message in r.message
    assert "FlopCounterMode" in r.details[0]


def test_the_6n_rule_with_and_without_embeddings_is_named():
    r = check_training_flops(lambda c, T: cost.six_n_rule(c, 1))
    assert r.status == FAILED and "that is the 6N rule" in r.message
    r = check_training_flops(lambda c, T: 6 * cost.theorem_5_2(c))
    assert r.status == FAILED and "6N with the embeddings counted" in r.message
    r = check_training_flops(lambda c, T: learner_flops(c, T) * T)
    assert r.status == FAILED and "per sequence" in r.message


@pytest.mark.parametrize(
    "answer, message",
    [
        (lambda c: 6 * c.d, "assumed d_ff = 4d"),
        (lambda c: 2 * c.d, "left out the MLP"),
        (lambda c: 2 * (2 * c.d + c.d_ff), "one attention product"),
        (lambda c: c.d, "T = d"),
        (lambda c: 2 * c.d + c.d_ff + 1, "beyond the crossing: there attention's products are 1.001 times the rest"),
        (lambda c: 2 * c.d + c.d_ff - 1, "below the crossing"),
    ],
)
def test_typical_takeover_answers_are_named(answer, message):
    r = check_attention_takeover(answer)
    assert r.status == FAILED and message in r.message


def test_non_positive_lengths_and_non_numbers():
    r = check_attention_takeover(lambda c: 0)
    assert r.status == FAILED and "positive" in r.message
    r = check_training_flops(lambda c, T: "many")
    assert r.status == FAILED and "should be a number" in r.message


def _measured_with_flop_counter(c, T):
    """A learner's measurement: one training step of a GPT on one sequence under FlopCounterMode
    (every A^h formed: FlopCounterMode has no formula for the fused CPU kernel)."""
    model = GPT(c.replace(T_max=max(T, c.T_max)))
    idx = torch.zeros(1, T, dtype=torch.long)
    counter = FlopCounterMode(display=False)
    with counter, attention_matrices_formed(model):
        F.cross_entropy(model(idx).flatten(0, 1), idx.flatten()).backward()
    return counter.get_total_flops() / T


def _six_n_plus_attention(c, T):
    N = c.L * (4 * c.d**2 + 2 * c.d * c.d_ff) + c.d * c.V  # weights that do matmul work
    return np.float64(6 * N + 12 * c.L * T * c.d)


@pytest.mark.parametrize(
    "flops_per_token",
    [_measured_with_flop_counter, _six_n_plus_attention, lambda c, T: torch.tensor(solutions.flops_per_token(c, T) * T) / T],
)
def test_flops_in_other_styles_pass(flops_per_token):
    assert check_training_flops(flops_per_token)


@pytest.mark.parametrize(
    "slip, message",
    [
        (lambda c, T: learner_flops(c, T) - 3 * 4 * c.L * T * (c.d - c.d_head), "for one head"),
        (lambda c, T: learner_flops(c, T) + 12 * c.L * (c.T_max - T) * c.d, "config.T_max"),
        (lambda c, T: 2 * learner_flops(c, T) / 3, "twice the forward, not once"),
        (lambda c, T: learner_flops(c, 1), "the same for T = 64 and T = 1024"),
    ],
)
def test_more_flop_slips_are_named(slip, message):
    r = check_training_flops(slip)
    assert not r and message in r.message


def _takeover_by_roots(c):
    """Attention 4 T^2 d against 8 T d^2 + 4 T d d_ff per block: the nonzero root, numerically."""
    return max(np.roots([4 * c.d, -(8 * c.d**2 + 4 * c.d * c.d_ff), 0]).real)


def _takeover_by_search(c):
    T = 1
    while 4 * T * T * c.d < 8 * T * c.d**2 + 4 * T * c.d * c.d_ff:
        T += 1
    return torch.tensor(T)


@pytest.mark.parametrize("takeover", [_takeover_by_roots, _takeover_by_search, lambda c: float(2 * c.d + c.d_ff)])
def test_takeover_in_other_styles_passes(takeover):
    assert check_attention_takeover(takeover)


def test_measured_crossing_is_the_closed_form_and_a_miss_is_still_measured():
    """The reference crossing, measured once per config, is 4 T^2 d = 8 T d^2 + 4 T d d_ff's T = 2d + d_ff, on
    the public configs and on a hidden variant's; an answer off it by one is measured at its own T and fails."""
    with shifted_seeds(12345):
        hidden = variant_points(TAKEOVER_CONFIGS, lambda rng: [small_config(rng) for _ in range(3)])
    for c in (*TAKEOVER_CONFIGS, *hidden):
        assert measured_crossing(c) == 2 * c.d + c.d_ff
        attention, rest = measured_split(c, 2 * c.d + c.d_ff + 1)
        assert attention > rest
    r = check_attention_takeover(lambda c: 2 * c.d + c.d_ff + (c.d == 64))  # right on two configs, one beyond on the other
    assert not r and "beyond the crossing" in r.message and "(d, d_ff) = (64, 128), your T = 257" in r.details[0]


@pytest.mark.parametrize(
    "answer, message",
    [
        (lambda c: c.H * (2 * c.d + c.d_ff), "for one head"),
        (lambda c: 2 * c.d + c.d_ff + c.V / (2 * c.L), "unembedding W_U"),
        (lambda c: 2 * (2 * c.d + c.d_ff), "cannot tell which"),  # one product or a causal half: unknowable
    ],
)
def test_more_takeover_answers_are_named(answer, message):
    r = check_attention_takeover(answer)
    assert not r and message in r.message


def test_half_the_attention_is_named_with_both_candidates_it_could_be():
    r = check_attention_takeover(lambda c: 2 * (2 * c.d + c.d_ff))
    assert "one attention product" in r.message and "causal mask" in r.message
    r = check_training_flops(lambda c, T: learner_flops(c, T, causal_half=True))
    assert "one of the two attention products" in r.message and "causal mask" in r.message


def test_flops_reference_passes_under_no_grad():
    with torch.no_grad():
        assert check_training_flops(solutions.flops_per_token) and check_attention_takeover(solutions.takeover_T)
