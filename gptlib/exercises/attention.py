"""Exercises 3 and 6: heads as low-rank circuits (Lecture 5, Section 1).

    check_factor_pair_dimension(fn)  Exercise 3: fn(d, d_head) -> the dimension of the set of
                                     pairs (W_Q, W_K) with W_Q W_K^T equal to one generic W_QK,
                                     compared with the dimension measured by attention.factor_pair_dimension
    check_head_circuits(fn)          Exercise 6: fn(attn, h) -> (W_QK^h, W_OV^h) from a
                                     MultiHeadAttention's per-head weights, compared with gptlib.analysis.attention
                                     (references computed first; fn gets its own copy of attn)
    check_rank_bounds(fn)            Exercise 6: fn(d, H, T) -> upper bounds on the ranks of W_QK^h,
                                     W_OV^h and S^h, compared with numerical ranks of random heads:
                                     a bound must never be exceeded and must be reached (tight)
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

from ..analysis import attention
from ..checking.mistakes import Mistake, close, name_mistake, scale_of
from ..checking.reading import as_int, as_matrix, as_numbers
from ..checking.running import Wrong, call, checker
from ..checking.variants import variant_points, variant_seed
from ..config import GPTConfig
from ..model import MultiHeadAttention

EX3, EX6 = "Exercise 3", "Exercise 6"
RTOL = 1e-5  # loose enough for an answer computed in float32

FACTOR_SHAPES = ((4, 1), (6, 2), (8, 3), (10, 4), (12, 6), (9, 9))  # (d, d_head)


def _other_factor_shapes(rng) -> list[tuple[int, int]]:
    """Six shapes (d, d_head), d_head <= d <= 12, for a hidden variant."""
    return [(d, rng.randint(1, d)) for d in (rng.randint(2, 12) for _ in range(6))]


FACTOR_MISTAKES = {
    Mistake("factor-counts-both-factors",
        "2 d d_head counts every entry of (W_Q, W_K): that is the space the pairs live in, not the set giving one W_QK"):
        lambda d, k: 2 * d * k,
    Mistake("factor-size-of-wqk", "d^2 is the size of W_QK itself, not of the set of its factorizations"): lambda d, k: d * d,
    Mistake("factor-dimension-of-products",
        "2 d d_head - d_head^2 is the dimension of the set of products (rank-d_head matrices); "
    "the pairs giving ONE product are what is left"): lambda d, k: 2 * d * k - k * k,
    Mistake("factor-zero-identifiable",
        "0 would mean the factors are identifiable; Remark 1.3's R already gives a whole family"): lambda d, k: 0,
    Mistake("factor-orthogonal-r-only",
        "you counted only orthogonal R (d_head(d_head-1)/2): any invertible R works"): lambda d, k: k * (k - 1) // 2,
    Mistake("factor-symmetric-r-only",
        "you counted only symmetric R (d_head(d_head+1)/2): any invertible R works"): lambda d, k: k * (k + 1) // 2,
    Mistake("factor-diagonal-r-only", "you counted only diagonal (scaling) R: any invertible R works"): lambda d, k: k,
    Mistake("factor-fixed-scale",
        "you fixed R's scale or determinant (d_head^2 - 1): any invertible R works, det R included"): lambda d, k: k * k - 1,
    Mistake("factor-one-factor", "d d_head is one factor's worth: once W_Q is chosen, W_K is fixed"): lambda d, k: d * k,
}


@functools.cache
def measured_factor_dimension(d: int, d_head: int) -> int:
    return attention.factor_pair_dimension(d, d_head).fiber_dimension


@checker(EX3)
def check_factor_pair_dimension(dimension) -> tuple[str, list[str]]:
    """Exercise 3: dimension(d, d_head) -> a whole number (int, float, numpy or one-element tensor).
    Compared, shape by shape, with the dimension measured from the rank of the Jacobian of
    (W_Q, W_K) -> W_Q W_K^T at a generic point."""
    shapes = variant_points(FACTOR_SHAPES, _other_factor_shapes)
    answers = {(d, k): as_int(call(dimension, d, k, what="d, d_head"), f"dimension({d}, {k})") for d, k in shapes}
    truths = {shape: measured_factor_dimension(*shape) for shape in shapes}
    wrong = [shape for shape in shapes if answers[shape] != truths[shape]]
    if not wrong:
        return f"equal to the measured dimension on all {len(shapes)} shapes (d, d_head).", [
            f"(d, d_head) = {shape}: {truths[shape]}" for shape in shapes[:3]
        ]
    d, k = wrong[0]
    details = [f"(d, d_head) = ({d}, {k}): yours {answers[(d, k)]}, measured {truths[(d, k)]}"]
    named = name_mistake(answers, FACTOR_MISTAKES)
    raise Wrong(named + "." if named else f"wrong on {len(wrong)} of {len(shapes)} shapes: "
                "which matrices R keep W_Q R (W_K R^-T)^T = W_QK?", details, mistake=None)


def _random_attention(d: int, H: int, seed: int) -> MultiHeadAttention:
    """A float64 MultiHeadAttention with N(0, 1) weights (generic full-rank factors)."""
    torch.manual_seed(variant_seed(seed))
    attn = MultiHeadAttention(GPTConfig(d=d, H=H)).double()
    with torch.no_grad():
        for p in attn.parameters():
            p.normal_()
    return attn


def _W_O_columns(attn: MultiHeadAttention, h: int) -> torch.Tensor:
    """Columns h*d_head..(h+1)*d_head-1 of W_O, transposed to (d_head, d): the wrong slice for W_O^h."""
    return attn.W_O[:, h * attn.d_head : (h + 1) * attn.d_head].T


# Typical wrong W_QK^h and W_OV^h, each a function of (attn, h) computed from the checker's own weights.
QK_MISTAKES = {
    Mistake("wqk-transposed", "your W_QK is transposed (W_K^h W_Q^h^T): the query side comes first, W_QK^h = W_Q^h (W_K^h)^T"):
        lambda attn, h: attention.W_QK(attn, h).T,
    Mistake("wqk-includes-scale", "your W_QK includes 1/sqrt(d_head): that factor belongs to the scores S^h, not to W_QK^h"):
        lambda attn, h: attention.W_QK(attn, h) / math.sqrt(attn.d_head),
    Mistake("wqk-head-0-only", "your W_QK uses head 0's W_Q, W_K for every head"): lambda attn, h: attention.W_QK(attn, 0),
    Mistake("wqk-summed-heads", "your W_QK sums every head's product: W_QK^h is head h's alone"):
        lambda attn, h: sum(attention.W_QK(attn, g) for g in range(attn.H)),
}
OV_MISTAKES = {
    Mistake("wov-transposed",
        "your W_OV is transposed (W_O^h^T W_V^h^T): rows of W_OV^h index what the head reads, so W_OV^h = W_V^h W_O^h"):
        lambda attn, h: attention.W_OV(attn, h).T,
    Mistake("wov-columns-of-wo",
        "you took W_O^h as columns of W_O: head h's output multiplies ROWS h*d_head..(h+1)*d_head-1 of W_O"):
        lambda attn, h: attn.W_V[h] @ _W_O_columns(attn, h),
    Mistake("wov-head-0-only", "your W_OV uses head 0's W_V, W_O^0 for every head"): lambda attn, h: attention.W_OV(attn, 0),
    Mistake("wov-summed-heads", "your W_OV sums every head's product: W_OV^h is head h's alone"):
        lambda attn, h: sum(attention.W_OV(attn, g) for g in range(attn.H)),
}


def _as_circuit_pair(answer, d: int, h: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(W_QK, W_OV) from a tuple or list of two (d, d) matrices, or one (2, d, d) tensor or array."""
    if isinstance(answer, (torch.Tensor, np.ndarray)) and tuple(answer.shape) == (2, d, d):
        answer = tuple(answer)
    if not isinstance(answer, (tuple, list)) or len(answer) != 2:
        raise Wrong(f"expected a pair (W_QK, W_OV), got {type(answer).__name__}", mistake="circuits-not-a-pair")
    return tuple(as_matrix(M, (d, d), f"your {name} for head {h}") for M, name in zip(answer, ("W_QK", "W_OV")))


def _name_circuit_mistake(name: str, answers: dict, truths: dict, mistakes: dict, attn: MultiHeadAttention) -> str:
    """What is wrong with one circuit (W_QK or W_OV) over all heads: a typical mistake it fits,
    else a scale factor measured on the first wrong head, else where it differs."""
    named = name_mistake(answers, mistakes, functools.partial(close, rtol=RTOL, atol=RTOL))
    if named:
        return named
    h = next(h for h in truths if not close(answers[(attn, h)], truths[h], RTOL, RTOL))
    s = scale_of(answers[(attn, h)], truths[h], RTOL, RTOL)
    if s is not None:
        return (f"your {name} for head {h} is the right product times {s:.4g}: W_QK^h and W_OV^h carry no scale factor "
                f"(1/sqrt(d_head) = {1 / math.sqrt(attn.d_head):.4g} belongs to the scores S^h)")
    return f"your {name} for head {h} differs from {'W_Q^h W_K^h^T' if name == 'W_QK' else 'W_V^h W_O^h'}"


@checker(EX6)
def check_head_circuits(head_circuits) -> tuple[str, list[str]]:
    """Exercise 6: head_circuits(attn, h) -> (W_QK^h, W_OV^h), each (d, d) (torch or numpy; a pair
    or one (2, d, d) array), from attn.W_Q[h], attn.W_K[h], attn.W_V[h] (each (d, d_head)) and
    attn.W_O (d, d). Compared with gptlib.analysis.attention, computed before the learner's code runs; the
    learner's function gets its own copy of attn, so changing it (in place) reaches nothing else."""
    attn = _random_attention(d=12, H=3, seed=0)
    d = attn.W_O.shape[0]
    with torch.no_grad():
        truths = {h: (attention.W_QK(attn, h), attention.W_OV(attn, h)) for h in range(attn.H)}
    answers = {(attn, h): _as_circuit_pair(call(head_circuits, attn, h, what="attn, h"), d, h) for h in range(attn.H)}
    problems = []
    with torch.no_grad():
        for i, (name, mistakes) in enumerate((("W_QK", QK_MISTAKES), ("W_OV", OV_MISTAKES))):
            ones = {point: pair[i] for point, pair in answers.items()}
            if not all(close(ones[(attn, h)], truths[h][i], RTOL, RTOL) for h in truths):
                problems.append(_name_circuit_mistake(name, ones, {h: t[i] for h, t in truths.items()}, mistakes, attn))
    if problems:
        raise Wrong("; ".join(problems) + ".", [f"(d, H) = ({d}, {attn.H}); compared with relative tolerance {RTOL:g}"],
                    mistake="circuits-differ")
    return f"W_QK^h and W_OV^h equal gptlib.analysis.attention' for all {attn.H} heads (relative tolerance {RTOL:g}).", []


RANK_SHAPES = ((12, 3, 2), (12, 3, 9), (16, 2, 5), (8, 8, 6), (10, 1, 4), (12, 4, 12), (6, 2, 10))  # (d, H, T)


def _other_rank_shapes(rng) -> list[tuple[int, int, int]]:
    """Seven shapes (d, H, T), H dividing d <= 16, for a hidden variant."""
    shapes = []
    for _ in range(7):
        H = rng.choice((1, 2, 3, 4))
        shapes.append((H * rng.randint(1, 16 // H), H, rng.randint(1, 12)))
    return shapes


RANK_MISTAKES = {
    Mistake("rank-bound-d",
        "rank <= d holds for any d x d matrix; W_QK^h and W_OV^h pass through a d_head = d/H-dimensional middle"):
            lambda d, H, T: (
        d,
        d,
        min(d, T),
    ),
    Mistake("rank-bound-t-only",
        "S^h is T x T, so its rank is also at most T: min(T, d_head)"): lambda d, H, T: (d // H, d // H, d // H),
    Mistake("rank-bound-misses-dhead",
        "S^h = X W_QK^h X^T / sqrt(d_head) factors through W_QK^h, so rank S^h <= d_head too, not only T"): lambda d, H, T: (
        d // H,
        d // H,
        T,
    ),
    Mistake("rank-bound-min-t-d",
        "rank S^h <= min(T, d) forgets that S^h factors through W_QK^h: min(T, d_head)"): lambda d, H, T: (
        d // H,
        d // H,
        min(T, d),
    ),
    Mistake("rank-bound-max",
        "a rank is at most the SMALLER of the two bounds: rank S^h <= min(T, d_head), not max"): lambda d, H, T: (
        d // H,
        d // H,
        max(T, d // H),
    ),
    Mistake("rank-bound-h-for-dhead",
        "d_head = d/H, not H: the middle of each product has d/H dimensions"): lambda d, H, T: (H, H, min(H, T)),
}


@functools.cache
def measured_ranks(d: int, H: int, T: int) -> tuple[int, int, int]:
    """Largest numerical rank over the heads of W_QK^h, W_OV^h, and of S^h on a random X (1, T, d)."""
    attn = _random_attention(d, H, seed=d + H + T)
    X = torch.randn(1, T, d, dtype=torch.float64)
    with torch.no_grad():
        S = attention.scores(attn, X)[0]  # (H, T, T)
        return tuple(
            max(attention.numerical_rank(M).rank for M in matrices)
            for matrices in (
                [attention.W_QK(attn, h) for h in range(H)],
                [attention.W_OV(attn, h) for h in range(H)],
                list(S),
            )
        )


@checker(EX6)
def check_rank_bounds(rank_bounds) -> tuple[str, list[str]]:
    """Exercise 6: rank_bounds(d, H, T) -> (bound on rank W_QK^h, on rank W_OV^h, on rank S^h), as a
    tuple, list, tensor or numpy array of whole numbers. Each bound must hold for random heads and
    be reached by them (the lecture's bounds are tight)."""
    names = ("W_QK^h", "W_OV^h", "S^h")
    answers = {}
    shapes = variant_points(RANK_SHAPES, _other_rank_shapes)
    for d, H, T in shapes:
        answer = as_numbers(call(rank_bounds, d, H, T, what="d, H, T"), names, "three bounds (W_QK, W_OV, S)")
        answers[(d, H, T)] = tuple(as_int(a, f"your bound on rank {n}") for a, n in zip(answer, names))
    for shape in shapes:
        got, truth = answers[shape], measured_ranks(*shape)
        if got == truth:
            continue
        details = [f"(d, H, T) = {shape}: yours {got}, random heads reach {truth}"]
        named = name_mistake(answers, RANK_MISTAKES)
        if named:
            raise Wrong(named + ".", details, mistake=None)
        problems = [f"your bound on rank {n} is violated: a random head has rank {t} > {g}" if g < t else
                    f"your bound on rank {n} holds but is not tight: random heads reach only {t}"
                    for n, g, t in zip(names, got, truth) if g != t]
        raise Wrong("; ".join(problems) + ".", details, mistake="rank-bound-wrong")
    return f"valid and tight on all {len(shapes)} shapes (d, H, T): random heads reach each bound exactly.", [
        "rank W_QK^h, W_OV^h <= d_head; rank S^h <= min(T, d_head)"
    ]
