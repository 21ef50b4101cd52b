"""LayerNorm geometry (Lecture 5, Section 4): a projection onto 1-perp, then a radial rescaling.

    centering_matrix(d)        P = I - 11^T/d, the orthogonal projector onto 1-perp (proof of Prop. 4.2)
    center(u)                  P u = u - mean(u) 1, row by row
    radial_rescale(v, eps)     v / sqrt(mean(v^2) + eps): onto the sphere of radius sqrt(d) when eps = 0
    layer_norm(u, ...)         Definition 4.1 = gamma * radial_rescale(center(u)) + beta
    layer_norm_jacobian(u)     d LN / du at one row: rank d - 2, the dimension of Prop. 4.2's image
    gained_sphere(gamma, beta) Remark 4.3: gamma * (Prop. 4.2's sphere) + beta, an ellipsoid for a coordinatewise gamma
    rms_norm(u, ...)           Aside 4.4: the radial step alone, gamma * radial_rescale(u)
    batch_norm(U, eps)         Aside 4.4's contrast: statistics across the batch, per coordinate

Every function acts on the last dimension (d) and broadcasts over leading ones, so a batch
U of shape (B, d) or a stream X of shape (B, T, d) works the same way.

Definition 4.1 as the lecture writes it is gptlib.model.LayerNorm.definition, with eps > 0.
Here it is computed in an overflow-safe form, because the LayerNorm sphere takes any finite u
and eps = 0 (Proposition 4.2's setting): each row is divided by a power of two near its
largest entry first (_overflow_safe_scale), so squares of 1e200 or 1e-200 neither overflow nor
underflow, and a zero-variance row (a constant u, or u = 0) with eps = 0, the 0/0 case the
lecture excludes, maps to the zero vector (then gamma * 0 + beta = beta), never to NaN.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .. import validation
from .jacobians import jacobian_of


def centering_matrix(d: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """P = I - (1/d) 1 1^T, shape (d, d): u P = u - mean(u) 1 for a row u (P is symmetric)."""
    d = validation.integer("d", d, at_least=1)
    return torch.eye(d, dtype=dtype) - torch.full((d, d), 1.0 / d, dtype=dtype)


@dataclass(frozen=True)
class ProjectorFacts:
    """What the proof of Proposition 4.2 uses about P, each measured."""

    self_adjoint: float  # max |P - P^T|
    idempotent: float  # max |P P - P|
    ones_in_kernel: float  # ||P 1||
    kernel_dim: int  # number of zero eigenvalues (1: the kernel is the line R 1)
    rank: int  # d - kernel_dim
    image_is_ones_perp: float  # max |1^T P v| over the columns v of P


def projector_facts(d: int, step=None) -> ProjectorFacts:
    """The facts the proof of Proposition 4.2 uses, measured on the matrix of a linear map of rows.

    step: (..., d) -> (..., d), default `center`. Its matrix P (step(u) = P u for a column u) is
    read off by applying it to the rows of the identity, so the facts test the function itself,
    not a formula for it. A step that is not the orthogonal projection onto 1-perp fails some of them.
    """
    d = validation.integer("d", d, at_least=1)
    P = (center if step is None else step)(torch.eye(d, dtype=torch.float64)).T  # (d, d): column j is step(e_j)
    ones = torch.ones(d, dtype=P.dtype)
    rank = int(torch.linalg.matrix_rank(P))  # SVD-based: P need not be symmetric
    return ProjectorFacts(
        self_adjoint=float((P - P.T).abs().max()),
        idempotent=float((P @ P - P).abs().max()),
        ones_in_kernel=float(torch.linalg.vector_norm(P @ ones)),
        kernel_dim=d - rank,
        rank=rank,
        image_is_ones_perp=float((ones @ P).abs().max()),
    )


def center(u: torch.Tensor) -> torch.Tensor:
    """Step 1 of Proposition 4.2: u - mean(u) 1, the orthogonal projection onto 1-perp. (..., d) -> (..., d)."""
    u = validation.rows(u)
    s = _overflow_safe_scale(u)  # (..., 1): mean(u) = s mean(u / s), whose sum cannot overflow
    return u - s * (u / s).mean(dim=-1, keepdim=True)


def _overflow_safe_scale(v: torch.Tensor, eps: float = 0.0) -> torch.Tensor:
    """A power of two s near max(max_i |v_i|, sqrt(eps)) for each row, (..., d) -> (..., 1).

    The formulas of this module give the same result for v / s and eps / s^2 as for v and eps,
    but on the scaled copy every square and sum stays near 1: squaring 1e200 would overflow to
    inf and squaring 1e-200 would underflow to 0. Dividing by a power of two is exact, so
    ordinary inputs give the very same bits. s is at least the smallest normal number (so 1/s
    is finite, also for a zero row), and a constant for autograd: the result does not depend on it.
    """
    m = v.detach().abs().amax(dim=-1, keepdim=True)  # (..., 1)
    low = max(math.sqrt(eps), torch.finfo(v.dtype).tiny)
    return 2.0 ** torch.floor(torch.log2(m.clamp(min=low)))


def radial_rescale(v: torch.Tensor, eps: float = 0.0) -> torch.Tensor:
    """v / sqrt(mean(v^2) + eps), row by row; (..., d) -> (..., d).

    With eps = 0 this is sqrt(d) v / ||v||: radial projection onto the sphere of radius sqrt(d)
    (step 2 of Proposition 4.2). A zero row with eps = 0 maps to zero instead of 0/0.
    """
    v = validation.rows(v, "v")
    eps = validation.real("eps", eps, at_least=0)  # Definition 4.1 asks eps >= 0
    s = _overflow_safe_scale(v, eps)  # (..., 1)
    return _rescale(v / s, eps / s / s)  # the same quotient, where squares cannot overflow


def _rescale(v: torch.Tensor, eps) -> torch.Tensor:
    """radial_rescale without the scaling: rows v (..., d), eps a float or one per row (..., 1)."""
    denominator = v.pow(2).mean(dim=-1, keepdim=True) + eps  # (..., 1)
    positive = denominator > 0
    safe = torch.where(positive, denominator, torch.ones_like(denominator))  # no 0/0, no NaN gradient
    return torch.where(positive, v * torch.rsqrt(safe), torch.zeros_like(v))


def _affine(x: torch.Tensor, gamma: torch.Tensor | None, beta: torch.Tensor | None) -> torch.Tensor:
    if gamma is not None:
        x = gamma * x
    if beta is not None:
        x = x + beta
    return x


def layer_norm(
    u: torch.Tensor, gamma: torch.Tensor | None = None, beta: torch.Tensor | None = None, eps: float = 0.0
) -> torch.Tensor:
    """Definition 4.1 as Proposition 4.2's composition, overflow-safe: gamma * radial_rescale(center(u), eps) + beta.

    mean(center(u)^2) is sigma(u)^2 (the biased variance, dividing by d), so this is
    gamma * (u - mean(u)) / sqrt(sigma(u)^2 + eps) + beta. (..., d) -> (..., d).
    """
    u = validation.rows(u)
    eps = validation.real("eps", eps, at_least=0)  # Definition 4.1 asks eps >= 0
    s = _overflow_safe_scale(u, eps)  # (..., 1): LN(u) with eps is LN(u / s) with eps / s^2, where nothing over- or underflows
    return _affine(_rescale(center(u / s), eps / s / s), gamma, beta)  # gamma * radial_rescale(center(u), eps) + beta


def layer_norm_jacobian(u: torch.Tensor, eps: float = 0.0) -> torch.Tensor:
    """d LN(u) / du at one row u (d,), with gamma = 1 and beta = 0: a (d, d) matrix, by reverse mode.

    LayerNorm acts row by row, so jacobians.jacobian_of (d copies of u as one batch, one plain
    backward pass) applies with T = 1.

    Proposition 4.2's image is a (d-2)-dimensional sphere, and the rank of this matrix at a
    nonconstant u is the dimension of the image near LN(u): with eps = 0 it is d - 2, the
    kernel being spanned by 1 (centering) and by u itself (scale invariance, Remark 4.3).
    With eps > 0 the radial direction is damped by eps / (sigma^2 + eps), not removed: rank d - 1.
    """
    u = validation.rows(u)
    if u.dim() != 1:
        raise ValueError(f"u must be one row of shape (d,), got shape {tuple(u.shape)}")
    return jacobian_of(lambda X: layer_norm(X, eps=eps), u.unsqueeze(0))  # (d, d): u as a sequence of one row


@dataclass(frozen=True)
class GainedSphere:
    """Remark 4.3's learned gain and shift applied to Proposition 4.2's image:
    {gamma * v + beta : v in 1-perp, ||v|| = sqrt(d)}. diag(gamma) is linear, so for gamma with no zero
    coordinate this is an ellipsoid of dimension d - 2 centred at beta, with semi-axis k of length
    semi_axes[k] along axes[k]; only a constant gamma keeps it round.
    """

    semi_axes: torch.Tensor  # (d - 1,), descending: sqrt(d) x the singular values of diag(gamma) on 1-perp
    axes: torch.Tensor  # (d - 1, d): orthonormal rows, the directions of the semi-axes
    beta: torch.Tensor  # (d,): the centre

    def residual(self, y: torch.Tensor) -> torch.Tensor:
        """For rows y (..., d): | ||(y - beta) in axis coordinates / semi_axes|| - 1 | plus the length of the
        part of y - beta off the ellipsoid's span. Zero exactly on the ellipsoid: (...,)."""
        offset = validation.rows(y) - self.beta  # (..., d)
        along = offset @ self.axes.T  # (..., d - 1)
        off_span = torch.linalg.vector_norm(offset - along @ self.axes, dim=-1)
        return (torch.linalg.vector_norm(along / self.semi_axes, dim=-1) - 1).abs() + off_span


def gained_sphere(gamma: torch.Tensor, beta: torch.Tensor | None = None) -> GainedSphere:
    """The image of Proposition 4.2's sphere under u -> gamma * u + beta (Remark 4.3), gamma and beta of shape (d,).

    A basis Q (d, d - 1) of 1-perp maps to diag(gamma) Q; its singular values, times the sphere's radius
    sqrt(d), are the semi-axes, and its left singular vectors their directions.
    """
    gamma = validation.rows(gamma, "gamma")
    if gamma.dim() != 1 or gamma.shape[0] < 2:
        raise ValueError(f"gamma must be one vector (d,) with d >= 2, got shape {tuple(gamma.shape)}")
    if not bool((gamma != 0).all()):
        raise ValueError("gamma must have no zero coordinate: a zero gain flattens the ellipsoid (not handled here)")
    d = gamma.shape[0]
    beta = torch.zeros_like(gamma) if beta is None else validation.tensor_of_shape(beta, (d,), "beta", "(d,)", "a vector")
    Q, _ = torch.linalg.qr(centering_matrix(d, gamma.dtype)[:, : d - 1])  # (d, d - 1): an orthonormal basis of 1-perp
    U, S, _ = torch.linalg.svd(gamma[:, None] * Q, full_matrices=False)  # U (d, d - 1), S (d - 1,)
    return GainedSphere(math.sqrt(d) * S, U.T, beta)


def rms_norm(u: torch.Tensor, gamma: torch.Tensor | None = None, eps: float = 0.0) -> torch.Tensor:
    """Aside 4.4: RMSNorm = gamma * u / sqrt(mean(u^2) + eps), the radial step without centering."""
    return _affine(radial_rescale(u, eps), gamma, None)


def batch_norm(U: torch.Tensor, eps: float = 0.0) -> torch.Tensor:
    """Aside 4.4's contrast: each coordinate normalized by its mean and variance over the batch.

    U has shape (B, d); row b of the result depends on every row of U. Training-mode
    statistics (biased variance), as torch.nn.functional.batch_norm(training=True) uses.
    A batch of one has no spread to measure, so it is refused (torch refuses it too).
    """
    U = validation.rows(U, "U")
    if U.dim() != 2:
        raise ValueError(f"U must be a batch of shape (B, d), got shape {tuple(U.shape)}")
    if U.shape[0] < 2:
        raise ValueError("BatchNorm needs at least 2 examples: batch statistics of a batch of one are undefined")
    return radial_rescale(center(U.T), eps).T  # per coordinate (column): center over the batch, divide by its std


def sigma(u: torch.Tensor) -> torch.Tensor:
    """sigma(u), the coordinate standard deviation of Section 4 (biased, divides by d). (..., d) -> (...)."""
    s = _overflow_safe_scale(u)  # (..., 1): sigma(u) = s sigma(u / s), where squares cannot overflow
    return s.squeeze(-1) * center(u / s).pow(2).mean(dim=-1).sqrt()


@dataclass(frozen=True)
class ImageFacts:
    """How far LayerNorm's outputs lie from Proposition 4.2's image, the sphere of radius sqrt(d) in 1-perp."""

    max_abs_coordinate_sum: float  # largest |1^T LN(u)|: distance from the hyperplane 1-perp
    max_norm_error: float  # largest | ||LN(u)|| - sqrt(d) |: distance from the sphere


def image_facts(U: torch.Tensor, eps: float = 0.0) -> ImageFacts:
    """Proposition 4.2 measured on the rows of U (B, d)."""
    out = layer_norm(U, eps=eps)  # (B, d)
    d = U.shape[-1]
    return ImageFacts(
        max_abs_coordinate_sum=float(out.sum(dim=-1).abs().max()),
        max_norm_error=float((torch.linalg.vector_norm(out, dim=-1) - math.sqrt(d)).abs().max()),
    )


def vector_with_sigma(direction: torch.Tensor, sigmas: torch.Tensor) -> torch.Tensor:
    """Rows s * sqrt(d) * c / ||c|| with c = center(direction): sigma of row i is sigmas[i]. (n, d)."""
    c = center(direction)  # (d,)
    norm = torch.linalg.vector_norm(c)
    if norm == 0:
        raise ValueError("direction must be nonconstant: its centered part is zero")
    unit = c / norm  # unit vector in 1-perp
    return sigmas[:, None] * math.sqrt(direction.shape[-1]) * unit  # (n, d)


def output_norm_against_sigma(d: int, sigmas: torch.Tensor, eps: float, seed: int = 0) -> torch.Tensor:
    """||LN(u)|| (gamma = 1, beta = 0) for vectors u of a fixed random direction with sigma(u) = sigmas.

    Remark 4.3: with eps = 0 every value is sqrt(d); with eps > 0 it is
    sqrt(d) sigma / sqrt(sigma^2 + eps), which falls to 0 as sigma -> 0. (n,).
    """
    generator = torch.Generator().manual_seed(seed)
    direction = torch.randn(d, generator=generator, dtype=sigmas.dtype)
    return torch.linalg.vector_norm(layer_norm(vector_with_sigma(direction, sigmas), eps=eps), dim=-1)


def scale_invariance_gap(u: torch.Tensor, scales: torch.Tensor, eps: float) -> torch.Tensor:
    """Remark 4.3: max_i |LN(c u) - LN(u)|_i for each c in scales (> 0). u (d,), result (n,)."""
    if not bool((scales > 0).all()):
        raise ValueError("scales must be > 0: Remark 4.3 concerns positive rescaling c > 0")
    base = layer_norm(u, eps=eps)  # (d,)
    scaled = layer_norm(scales[:, None] * u, eps=eps)  # (n, d)
    return (scaled - base).abs().amax(dim=-1)


@dataclass(frozen=True)
class WeightScaleStudy:
    """Exercise 4 at each scale c, every field (k,)."""

    output_change: torch.Tensor  # max |f_{cW} - f_W|: zero, LN ignores the scale
    loss: torch.Tensor
    grad_norm: torch.Tensor  # ||grad at cW||
    grad_norm_times_c: torch.Tensor  # c ||grad at cW||: equals ||grad at W|| when the 1/c law holds


def weight_scale_before_layernorm(
    W: torch.Tensor, X: torch.Tensor, readout: torch.Tensor, scales: torch.Tensor, eps: float = 0.0
) -> WeightScaleStudy:
    """Exercise 4: f_W(X) = LN(X W^T) with loss = sum(f_W(X) * readout), evaluated at c W for each c.

    Because LN ignores positive scale (Remark 4.3), f_{cW} = f_W, and by the chain rule
    grad_W loss at cW equals grad_W loss at W divided by c. So weight decay (which only
    shrinks c) leaves the function alone while making the gradient step relatively larger.
    W (m, n), X (B, n), readout (B, m), scales (k,).
    """
    if not bool((scales > 0).all()):
        raise ValueError("scales must be > 0: weight decay shrinks W by a positive factor")
    base = layer_norm(X @ W.T, eps=eps)  # (B, m)
    rows = {"output_change": [], "loss": [], "grad_norm": [], "grad_norm_times_c": []}
    for c in scales:
        Wc = (c * W).detach().requires_grad_(True)  # (m, n)
        out = layer_norm(X @ Wc.T, eps=eps)  # (B, m)
        loss = (out * readout).sum()
        (grad,) = torch.autograd.grad(loss, Wc)
        rows["output_change"].append((out.detach() - base).abs().max())
        rows["loss"].append(loss.detach())
        rows["grad_norm"].append(torch.linalg.vector_norm(grad))
        rows["grad_norm_times_c"].append(c * torch.linalg.vector_norm(grad))
    return WeightScaleStudy(**{key: torch.stack(values) for key, values in rows.items()})
