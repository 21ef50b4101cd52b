"""Exercise 8: training FLOPs per token against FlopCounterMode, and where attention takes over."""

import pytest

from gptlib import cost
from gptlib.exercises import check_attention_takeover, check_training_flops
from gptlib.exercises.result import FAILED

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
        (lambda c: 2 * c.d + c.d_ff + 1, "times the rest"),
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
