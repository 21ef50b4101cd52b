"""Exercises 3 and 6: factor-pair dimension, head circuits and rank bounds."""

import math

import pytest

from gptlib.exercises import check_factor_pair_dimension, check_head_circuits, check_rank_bounds, solutions
from gptlib.exercises.result import ERROR, FAILED

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize(
    "answer, message",
    [
        (lambda d, k: 2 * d * k, "counts every entry of (W_Q, W_K)"),
        (lambda d, k: d * d, "size of W_QK itself"),
        (lambda d, k: 2 * d * k - k * k, "dimension of the set of products"),
        (lambda d, k: 0, "identifiable"),
        (lambda d, k: k * (k - 1) // 2, "only orthogonal R"),
        (lambda d, k: k, "only diagonal"),
    ],
)
def test_typical_factor_dimensions_are_named(answer, message):
    r = check_factor_pair_dimension(answer)
    assert r.status == FAILED and message in r.message


def test_an_unrecognised_dimension_still_fails_with_the_first_shape():
    r = check_factor_pair_dimension(lambda d, k: k * k + (d == 12))
    assert r.status == FAILED and "(12, 6)" in r.details[0]


def _transposed_OV(attn, h):
    W_QK, W_OV = solutions.head_circuits(attn, h)
    return W_QK, W_OV.T


def _columns_of_W_O(attn, h):
    d_head = attn.W_Q.shape[-1]
    return attn.W_Q[h] @ attn.W_K[h].T, attn.W_V[h] @ attn.W_O[:, h * d_head : (h + 1) * d_head].T


@pytest.mark.parametrize(
    "circuits, message",
    [
        (_transposed_OV, "W_OV is transposed"),
        (lambda attn, h: (attn.W_K[h] @ attn.W_Q[h].T, solutions.head_circuits(attn, h)[1]), "W_QK is transposed"),
        (lambda attn, h: (attn.W_Q[h] @ attn.W_K[h].T / math.sqrt(attn.W_Q.shape[-1]), solutions.head_circuits(attn, h)[1]),
         "1/sqrt(d_head)"),
        (_columns_of_W_O, "columns of W_O"),
        (lambda attn, h: solutions.head_circuits(attn, 0), "head 0's weights"),
    ],
)
def test_typical_circuit_mistakes_are_named(circuits, message):
    r = check_head_circuits(circuits)
    assert r.status == FAILED and message in r.message


def test_the_full_W_O_is_a_shape_error_reported_not_raised():
    r = check_head_circuits(lambda attn, h: (attn.W_Q[h] @ attn.W_K[h].T, attn.W_V[h] @ attn.W_O))
    assert r.status == ERROR and "RuntimeError" in r.message


@pytest.mark.parametrize(
    "bounds, message",
    [
        (lambda d, H, T: (d, d, min(d, T)), "rank <= d holds for any d x d matrix"),
        (lambda d, H, T: (d // H, d // H, d // H), "its rank is also at most T"),
        (lambda d, H, T: (d // H, d // H, T), "factors through W_QK^h"),
        (lambda d, H, T: (d // H - 1, d // H, min(T, d // H)), "is violated"),
    ],
)
def test_typical_rank_bounds_are_named(bounds, message):
    r = check_rank_bounds(bounds)
    assert r.status == FAILED and message in r.message


def test_a_single_rank_bound_is_refused():
    r = check_rank_bounds(lambda d, H, T: d // H)
    assert r.status == FAILED and "three bounds" in r.message


def test_circuits_computed_in_float32_are_accepted():
    assert check_head_circuits(lambda attn, h: tuple(M.float() for M in solutions.head_circuits(attn, h))).passed
