"""The position-wise MLP of Lecture 5, Section 2, and what sets it apart from attention.

    gelu_exact(t), gelu_tanh(t)           sigma(t) = t Phi(t) and its tanh approximation
    mlp_by_rows(mlp, X)                   Definition 2.1 written out, one row u at a time
    definition_error(f, mlp, X)           how far a map is from Definition 2.1 with mlp's weights, relative
    permutation_error(f, X, perm)         how far f is from commuting with a permutation of positions
    row_isolation_error(f, X, t)          how much row t of f(X) moves when every other row changes
    convex_weights_error(A)               how far each row of A is from convex weights
    separating_direction(point, rows)     a direction certifying point lies outside conv(rows)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .. import validation
from ..model import MLP


def gelu_exact(t: torch.Tensor) -> torch.Tensor:
    """sigma(t) = t Phi(t) with Phi(t) = (1 + erf(t / sqrt 2)) / 2, the normal CDF (Definition 2.1)."""
    return t * 0.5 * (1.0 + torch.erf(t / math.sqrt(2.0)))


def gelu_tanh(t: torch.Tensor) -> torch.Tensor:
    """The tanh approximation t/2 (1 + tanh(sqrt(2/pi) (t + 0.044715 t^3))) of GPT-2's code."""
    return 0.5 * t * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (t + 0.044715 * t**3)))


def mlp_by_rows(mlp: MLP, X: torch.Tensor) -> torch.Tensor:
    """Definition 2.1 one row at a time, MLP(u) = W_2 sigma(W_1 u + b_1) + b_2 with the exact GELU: (T, d) -> (T, d)."""
    X = validation.sequence(X, mlp.W_1.shape[1])
    return torch.stack([mlp.W_2 @ gelu_exact(mlp.W_1 @ u + mlp.b_1) + mlp.b_2 for u in X])  # (T, d)


def definition_error(f: Callable[[torch.Tensor], torch.Tensor], mlp: MLP, X: torch.Tensor) -> float:
    """max |f(X) - MLP(X)| / (1 + max |MLP(X)|), MLP(X) being Definition 2.1 row by row with mlp's weights.

    f maps (1, T, d) to (1, T, d), as the module does. Relative to the output's size because float32
    rounding grows with it: the module itself stays below 1e-6 on the course models (measured).
    """
    reference = mlp_by_rows(mlp, X)  # (T, d)
    return float((f(X.unsqueeze(0))[0] - reference).abs().max() / (1 + reference.abs().max()))


def permutation_error(f: Callable[[torch.Tensor], torch.Tensor], X: torch.Tensor, perm: torch.Tensor) -> float:
    """max |f(X[:, perm]) - f(X)[:, perm]|: zero for a map applied to every row alike (Definition 2.1)."""
    X = validation.batch(X)
    T = X.shape[1]
    if sorted(perm.tolist()) != list(range(T)):
        raise ValueError(f"perm must be a permutation of 0..{T - 1}")
    return float((f(X[:, perm]) - f(X)[:, perm]).abs().max())


def row_isolation_error(
    f: Callable[[torch.Tensor], torch.Tensor], X: torch.Tensor, t: int, generator: torch.Generator | None = None
) -> float:
    """max |f(X')_t - f(X)_t| where X' redraws every row except t: zero when row t ignores the others."""
    X = validation.batch(X)
    if not 0 <= t < X.shape[1]:
        raise ValueError(f"position t must lie in [0, T) = [0, {X.shape[1]}), got {t}")
    X_other = torch.randn(X.shape, generator=generator, dtype=X.dtype) * X.std()  # (B, T, d)
    X_other[:, t] = X[:, t]
    return float((f(X_other)[:, t] - f(X)[:, t]).abs().max())


def convex_weights_error(A: torch.Tensor) -> tuple[float, float]:
    """(most negative weight or 0, max |row sum - 1|) for attention weights A (..., T, T).

    Both are zero exactly when every row is a vector of convex weights (Remark 2.2).
    """
    return float(A.min().clamp(max=0).abs()), float((A.sum(-1) - 1).abs().max())


@dataclass(frozen=True)
class Separation:
    """Direction u with margin = u.point - max_s u.rows_s; margin > 0 proves point is outside conv(rows)."""

    name: str
    direction: torch.Tensor  # (d,), unit length
    margin: float


def separating_direction(point: torch.Tensor, rows: torch.Tensor) -> Separation:
    """The best of a few candidate directions for separating `point` (d,) from conv(rows) (n, d).

    A convex combination c = sum_s w_s r_s has u.c <= max_s u.r_s for every direction u, so a
    positive margin is a certificate that `point` is not a convex combination of the rows
    (Remark 2.2). Candidates: the 2d coordinate directions +-e_j, point minus the rows' mean,
    and the part of point orthogonal to the rows' span (least squares).
    """
    if point.dim() != 1 or rows.dim() != 2 or rows.shape[1] != point.shape[0]:
        raise ValueError(f"need point (d,) and rows (n, d), got {tuple(point.shape)} and {tuple(rows.shape)}")
    point, rows = point.double(), rows.double()
    d = point.shape[0]
    eye = torch.eye(d, dtype=torch.float64)
    coefficients = torch.linalg.lstsq(rows.T, point.unsqueeze(1)).solution  # (n, 1)
    names = [f"+e_{j}" for j in range(d)] + [f"-e_{j}" for j in range(d)] + ["point - mean(rows)", "point off span(rows)"]
    mean_gap = point - rows.mean(0)  # (d,)
    off_span = point - (rows.T @ coefficients).squeeze(1)  # (d,)
    candidates = torch.cat((eye, -eye, mean_gap.unsqueeze(0), off_span.unsqueeze(0)))  # (2d + 2, d), in the order of names
    norms = candidates.norm(dim=1)  # (2d + 2,)
    units = candidates / norms.unsqueeze(1)  # (2d + 2, d); a zero candidate gives nan and is skipped below
    margins = (units @ point - (units @ rows.T).amax(dim=1)).masked_fill(norms == 0, -math.inf)  # (2d + 2,)
    best = int(margins.argmax())  # the first of equal margins, in the order of the docstring
    return Separation(names[best], units[best], float(margins[best]))
