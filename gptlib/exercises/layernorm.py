"""Exercise 4: LayerNorm as Proposition 4.2's two steps, and weight decay just before a LayerNorm.

    check_layer_norm(project, rescale)  project(u): onto 1-perp; rescale(v, eps): radially, so
                                        that gamma * rescale(project(u), eps) + beta equals
                                        torch.nn.functional.layer_norm. Each step is compared
                                        on its own first, so a mistake is named at its step.
    check_weight_decay(predict)         predict(c) -> (gradient factor, step factor): when W is
                                        replaced by c W in f_W(x) = LN(W x), by what factor do
                                        ||grad_W|| and the relative step ||lr grad|| / ||W|| change?
                                        Compared with gradients measured by autograd.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .. import geometry
from .result import Wrong, as_float, as_matrix, call, checker, matching, refuse_typical_mistake

EX4 = "Exercise 4"
EPSILONS = (0.5, 1e-5, 0.0)  # 0.5 first: where eps sits is plain to see
ATOL = 1e-6  # outputs are O(1); loose enough for an answer computed in float32


def _inputs() -> list[torch.Tensor]:
    """Rows of several shapes and scales, float64, with a nonzero mean so centering matters."""
    generator = torch.Generator().manual_seed(0)
    shapes = ((7,), (5, 7), (2, 3, 16))
    return [3 * torch.randn(shape, generator=generator, dtype=torch.float64) + 2 for shape in shapes]


def project_variants(u: torch.Tensor) -> dict[str, torch.Tensor]:
    return {
        "your projection leaves u unchanged: without centering the normalization is RMSNorm (Aside 4.4)": u,
        "you centered over the wrong dimension (the batch, as BatchNorm does): LayerNorm centers each row over its d features": (
            u - u.mean(dim=0, keepdim=True)
        ),
        "you subtracted the mean of the whole tensor: each row (position) is centered on its own": u - u.mean(),
        "your projection also rescales: step 1 only subtracts the mean, step 2 rescales": geometry.layer_norm(u),
        "you subtracted the mean times d (the sum): u - mean(u) 1 subtracts the mean once": u - u.sum(-1, keepdim=True),
    }


UNIT_SPHERE = "your rows land on the unit sphere: LayerNorm's sphere has radius sqrt(d) (divide by the RMS, not the norm)"


def rescale_variants(v: torch.Tensor, eps: float) -> dict[str, torch.Tensor]:
    d = v.shape[-1]
    mean_square = v.pow(2).mean(-1, keepdim=True)
    unbiased = v.pow(2).sum(-1, keepdim=True) / (d - 1)
    return {
        "you used the unbiased variance (dividing by d - 1, torch.var's default): sigma^2 of Section 4 divides by d": v
        / torch.sqrt(unbiased + eps),
        "your eps sits outside the square root: Definition 4.1 divides by sqrt(sigma^2 + eps)": v / (mean_square.sqrt() + eps),
        "the unbiased variance AND eps outside the square root (v / (v.std() + eps)): sigma^2 divides by d, eps goes inside": v
        / (unbiased.sqrt() + eps),
        UNIT_SPHERE: v / torch.sqrt(v.pow(2).sum(-1, keepdim=True) + eps),
        "you divided by the variance instead of its square root": v / (mean_square + eps),
        "your eps is ignored": v / mean_square.sqrt(),
    }


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.allclose(a, b, rtol=0, atol=ATOL)


@checker(EX4)
def check_layer_norm(project, rescale) -> tuple[str, list[str]]:
    """Exercise 4: project(u) -> u projected onto 1-perp, and rescale(v, eps) -> v / sqrt(mean(v^2) + eps),
    both row by row on the last dimension of any (..., d) tensor. Then the composition with random
    gamma, beta must equal torch.nn.functional.layer_norm."""
    inputs = _inputs()
    for u in inputs:
        got = as_matrix(call(project, u.clone(), what="u"), u.shape, "project(u)")
        if not _same(got, geometry.center(u)):
            names = matching(got, project_variants(u), _same)
            message = names[0] if names else "project(u) is not u - mean(u) 1 row by row"
            raise Wrong(message + ".", [f"u of shape {tuple(u.shape)}"])
    for u in inputs:
        v = geometry.center(u)
        for eps in EPSILONS:
            got = as_matrix(call(rescale, v.clone(), eps, what="v, eps"), v.shape, "rescale(v, eps)")
            if not _same(got, geometry.radial_rescale(v, eps)):
                names = matching(got, rescale_variants(v, eps), _same)
                if not names and torch.allclose(torch.linalg.vector_norm(got, dim=-1), torch.ones(()).double(), atol=0.05):
                    names = [UNIT_SPHERE]  # with eps wherever: rows of norm about 1
                message = names[0] if names else "rescale(v, eps) is not v / sqrt(mean(v^2) + eps) row by row"
                raise Wrong(message + ".", [f"v of shape {tuple(v.shape)}, eps = {eps}"])
    generator = torch.Generator().manual_seed(1)
    for u in inputs:
        d = u.shape[-1]
        gamma, beta = torch.randn(2, d, generator=generator, dtype=torch.float64)
        ours = gamma * call(rescale, call(project, u.clone()), 1e-5) + beta
        if not _same(ours, F.layer_norm(u, (d,), gamma, beta, 1e-5)):
            raise Wrong("each step is right alone, but gamma * rescale(project(u)) + beta differs from F.layer_norm.")
    return f"gamma * rescale(project(u), eps) + beta equals F.layer_norm on {len(inputs)} shapes (to within {ATOL:g}).", [
        f"each step checked alone for eps in {EPSILONS}"
    ]


SCALES = (0.25, 0.5, 2.0, 3.0)

DECAY_MISTAKES = {
    "the output does not change with c (scale invariance), but the gradient does: it scales like 1/c": lambda c: (1.0, 1 / c**2),
    "a smaller W gets a LARGER gradient, not a smaller one: the factor is 1/c, not c": lambda c: (c, 1.0),
    "the gradient factor 1/c is right, but the step is measured relative to ||cW||, which is c times larger: 1/c^2": lambda c: (
        1 / c,
        1 / c,
    ),
    "you swapped the two factors: the gradient scales like 1/c, the relative step like 1/c^2": lambda c: (1 / c**2, 1 / c),
}


def measured_decay_factors(c: float) -> tuple[float, float]:
    """(||grad at cW|| / ||grad at W||, relative step at cW / relative step at W), by autograd in float64."""
    generator = torch.Generator().manual_seed(2)
    W = torch.randn(16, 12, generator=generator, dtype=torch.float64)  # (m, n)
    X = torch.randn(32, 12, generator=generator, dtype=torch.float64)  # (B, n)
    readout = torch.randn(32, 16, generator=generator, dtype=torch.float64)  # (B, m)
    grads = geometry.weight_scale_before_layernorm(W, X, readout, torch.tensor([1.0, c], dtype=torch.float64)).grad_norm
    gradient = (grads[1] / grads[0]).item()
    return gradient, gradient / c  # the relative step lr ||g|| / ||W|| also divides by ||cW|| = c ||W||


@checker(EX4)
def check_weight_decay(predict) -> tuple[str, list[str]]:
    """Exercise 4: predict(c) -> (gradient factor, step factor) for f_W(x) = LN(W x) at c W versus W:
    the factor on ||grad_W loss|| and on the relative step ||lr grad|| / ||W|| of plain gradient descent."""
    answers = {}
    for c in SCALES:
        answer = call(predict, c, what="c")
        if not isinstance(answer, (tuple, list)) or len(answer) != 2:
            raise Wrong(f"expected a pair (gradient factor, step factor), got {answer!r:.60}")
        answers[c] = tuple(as_float(a, "a factor") for a in answer)
    measured = {c: measured_decay_factors(c) for c in SCALES}

    def close(a, b):
        return all(abs(x - y) <= 1e-6 * abs(y) for x, y in zip(a, b))

    for c in SCALES:
        if not close(answers[c], measured[c]):
            details = [f"c = {c}: yours ({answers[c][0]:.4g}, {answers[c][1]:.4g}), "
                       f"measured ({measured[c][0]:.4g}, {measured[c][1]:.4g})"]
            refuse_typical_mistake(answers, DECAY_MISTAKES, details, close)
            raise Wrong("your factors differ from the measured ones (relative tolerance 1e-6).", details)
    return (
        f"both factors agree with autograd for c in {SCALES} (relative tolerance 1e-6):"
        " weight decay (c < 1) leaves f alone but makes every later step relatively larger.",
        [],
    )
