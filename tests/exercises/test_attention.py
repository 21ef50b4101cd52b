"""Exercises 3 and 6: factor-pair dimension, head circuits and rank bounds."""

import math

import numpy as np
import pytest
import torch

from gptlib.checking import ERROR, FAILED
from gptlib.exercises import attention, check_factor_pair_dimension, check_head_circuits, check_rank_bounds
from gptlib.exercises.answers import solutions
from tests.support.variants import refused_variants

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
        (lambda attn, h: solutions.head_circuits(attn, 0), "uses head 0's W_V, W_O^0 for every head"),
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


def _dimension_by_rank(d, k):
    """The dimension measured as a learner might: 2 d k minus the rank of the Jacobian of the product map."""
    W_Q, W_K = torch.randn(d, k, dtype=torch.float64), torch.randn(d, k, dtype=torch.float64)
    J = torch.func.jacrev(lambda q, k_: q @ k_.T, argnums=(0, 1))(W_Q, W_K)  # two (d, d, d, k) blocks
    rank = torch.linalg.matrix_rank(torch.cat([part.reshape(d * d, -1) for part in J], dim=1))
    return 2 * d * k - rank  # a 0-d tensor


@pytest.mark.parametrize(
    "dimension", [lambda d, k: np.int64(k) ** 2, lambda d, k: float(k * k), lambda d, k: torch.tensor(k) ** 2, _dimension_by_rank]
)
def test_factor_dimensions_in_other_styles_pass(dimension):
    assert check_factor_pair_dimension(dimension)


@pytest.mark.parametrize(
    "answer, message",
    [
        (lambda d, k: d * k, "one factor's worth"),
        (lambda d, k: k * k - 1, "fixed R's scale or determinant"),
        (lambda d, k: k * (k + 1) // 2, "only symmetric R"),
    ],
)
def test_more_factor_dimension_mistakes_are_named(answer, message):
    r = check_factor_pair_dimension(answer)
    assert not r and message in r.message


def _einsum_circuits(attn, h):
    d_head = attn.W_Q.shape[-1]
    W_O_h = attn.W_O.view(-1, d_head, attn.W_O.shape[1])[h]  # (d_head, d): the rows of head h
    return (torch.einsum("ik,jk->ij", attn.W_Q[h], attn.W_K[h]), torch.einsum("ik,kj->ij", attn.W_V[h], W_O_h))


def _numpy_circuits(attn, h):
    W_Q, W_K, W_V, W_O = (W.detach().numpy() for W in (attn.W_Q[h], attn.W_K[h], attn.W_V[h], attn.W_O))
    k = W_Q.shape[1]
    return [W_Q @ W_K.T, W_V @ W_O[h * k : (h + 1) * k]]


def _stacked_circuits(attn, h):
    return torch.stack(solutions.head_circuits(attn, h)).float()  # one (2, d, d) tensor, float32


@pytest.mark.parametrize("circuits", [_einsum_circuits, _numpy_circuits, _stacked_circuits])
def test_head_circuits_in_other_styles_pass(circuits):
    assert check_head_circuits(circuits)


def _divides_W_Q_in_place(attn, h):
    with torch.no_grad():
        attn.W_Q[h] /= math.sqrt(attn.W_Q.shape[-1])  # changes the weights it was given
    return solutions.head_circuits(attn, h)


def _sums_the_heads(attn, h):
    return tuple(sum(M) for M in zip(*(solutions.head_circuits(attn, g) for g in range(attn.W_Q.shape[0]))))


def _scaled_by_sqrt_d(attn, h):
    W_QK, W_OV = solutions.head_circuits(attn, h)
    return W_QK / math.sqrt(attn.W_O.shape[0]), W_OV


def _numpy_transposed_OV(attn, h):
    W_QK, W_OV = solutions.head_circuits(attn, h)
    return W_QK, W_OV.T.detach().numpy()


@pytest.mark.parametrize(
    "circuits, named",
    [
        (_divides_W_Q_in_place, ["your W_QK includes 1/sqrt(d_head)"]),
        (_sums_the_heads, ["your W_QK sums every head's product", "your W_OV sums every head's product"]),
        (_scaled_by_sqrt_d, ["your W_QK for head 0 is the right product times 0.2887"]),  # 1/sqrt(12), measured
        (_numpy_transposed_OV, ["your W_OV is transposed"]),
    ],
)
def test_more_circuit_mistakes_are_named_and_nothing_else(circuits, named):
    r = check_head_circuits(circuits)
    assert not r and all(text in r.message for text in named)
    assert r.message.count("your W_") == len(named)  # the right matrix is not blamed


def _ranks_measured(d, H, T):
    """The bounds a learner might measure: numerical ranks of one random head's products."""
    k = d // H
    W_Q, W_K, W_V, X = torch.randn(d, k), torch.randn(d, k), torch.randn(d, k), torch.randn(T, d)
    W_O_h = torch.randn(k, d)
    ranks = [torch.linalg.matrix_rank(M) for M in (W_Q @ W_K.T, W_V @ W_O_h, X @ W_Q @ W_K.T @ X.T)]
    return torch.stack(ranks)  # a tensor of three


@pytest.mark.parametrize(
    "bounds",
    [
        lambda d, H, T: torch.tensor([d // H, d // H, min(T, d // H)]),
        lambda d, H, T: np.array([d / H, d / H, min(T, d / H)]),
        lambda d, H, T: [d // H] * 2 + [min(T, d // H)],
        _ranks_measured,
    ],
)
def test_rank_bounds_in_other_containers_and_styles_pass(bounds):
    assert check_rank_bounds(bounds)


@pytest.mark.parametrize(
    "bounds, message",
    [
        (lambda d, H, T: (d // H, d // H, min(T, d)), "min(T, d) forgets"),
        (lambda d, H, T: (d // H, d // H, max(T, d // H)), "SMALLER of the two bounds"),
        (lambda d, H, T: (d // H, d, min(T, d // H)), "rank W_OV^h holds but is not tight"),
        (lambda d, H, T: (d // H + 1, d // H - 1, min(T, d // H)),
         "rank W_QK^h holds but is not tight: random heads reach only 4; your bound on rank W_OV^h is violated"),
    ],
)
def test_more_rank_bound_mistakes_are_named(bounds, message):
    r = check_rank_bounds(bounds)
    assert not r and message in r.message


# ---- the tolerance against float32 rounding and against a mistake just above it (issue 42) ------

@pytest.mark.slow  # the checker in 200 hidden variants (tests/support/variants.py)
def test_circuits_computed_in_float32_pass_in_200_hidden_variants_and_an_entry_off_by_twice_the_tolerance_fails():
    assert not refused_variants(check_head_circuits, lambda attn, h: solutions.head_circuits(attn.float(), h))

    def off(size):
        def head_circuits(attn, h):
            W_QK, W_OV = solutions.head_circuits(attn, h)
            W_QK[0, 0] += size * attention.RTOL * (1 + W_QK[0, 0].abs())  # close(rtol=RTOL, atol=RTOL), entry by entry
            return W_QK, W_OV
        return head_circuits

    r = check_head_circuits(off(2.0))
    assert r.status == FAILED and "W_QK for head 0 differs" in r.message, r
    assert check_head_circuits(off(0.5)).passed
