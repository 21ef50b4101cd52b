"""Heads as low-rank circuits (Lecture 5, Section 1).

    W_QK(attn, h)               W_Q^h (W_K^h)^T, the QK circuit              (d, d)
    W_OV(attn, h)               W_V^h W_O^h, the OV circuit                  (d, d)
    attention_input(model, c, l) the X that layer l's MHA reads (LN_1(X^(l)) in pre-norm)
    head_contributions(attn, X, A) A^h X W_OV^h for every head (Proposition 1.2) (B, H, T, d)
    scores(attn, X)             S^h = X W_QK^h X^T / sqrt(d_head), unmasked  (B, H, T, T)
    forward_scores(model, c, l) S^h as layer l's own queries and keys gave them in the cached pass (B, H, T, T)
    numerical_rank(M)           singular values, the stated tolerance, the rank
    head_ranks(model, cache)    Exercise 6: ranks of W_QK^h, W_OV^h and the forward pass's S^h (format_head_ranks)
    gauge_transform(...)        Remark 1.3's GL(d_head) reparametrization of one head
    factor_pair_dimension(...)  Exercise 3: the dimension of the set of (W_Q, W_K) giving one W_QK
    head_budget_comparison(...) Remark 1.4: one full-width head against H heads

The output bias b_O is not part of any head: MHA(X) = sum_h A^h X W_OV^h + b_O, so
`head_contributions` leaves it out (Definition 1.1 itself is gptlib.model.MultiHeadAttention.definition).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch

from .. import validation
from ..config import GPTConfig
from ..model import GPT, MultiHeadAttention
from .cache import Cache, reads_model


def _check_head(attn: MultiHeadAttention, h: int) -> int:
    return validation.integer("head index h", h, at_least=0, at_most=attn.H - 1)


def W_QK(attn: MultiHeadAttention, h: int) -> torch.Tensor:
    """W_QK^h = W_Q^h (W_K^h)^T, the bilinear form behind head h's scores (Section 1): (d, d)."""
    h = _check_head(attn, h)
    return attn.W_Q[h] @ attn.W_K[h].T


def W_OV(attn: MultiHeadAttention, h: int) -> torch.Tensor:
    """W_OV^h = W_V^h W_O^h, the map from a read row to head h's write (Proposition 1.2): (d, d)."""
    h = _check_head(attn, h)
    return attn.W_V[h] @ attn.W_O_head(h)


def attention_input(model: GPT, cache: Cache, l: int) -> torch.Tensor:
    """The X that layer l's MHA reads: LN_1(X^(l)) in a pre-norm block, X^(l) itself in post-norm."""
    return cache.ln_1(l) if model.config.norm == "pre" else cache.X(l)


def head_contributions(attn: MultiHeadAttention, X: torch.Tensor, A: torch.Tensor | None = None) -> torch.Tensor:
    """Proposition 1.2's terms A^h X W_OV^h for every head h, without b_O: (B, H, T, d).

    Summing over h and adding b_O gives MHA(X). Pass the A^h this X produced, (B, H, T, T)
    (cache.A(l) for X = attention_input(model, cache, l)), to reuse it; without A it is
    computed from X.
    """
    X = validation.batch(X, attn.W_O.shape[0])
    if A is None:
        q, k, _ = attn.qkv(X)  # each (B, H, T, d_head)
        A = attn.attention_matrices(q, k)  # (B, H, T, T)
    B, T = X.shape[:2]
    A = validation.tensor_of_shape(A, (B, attn.H, T, T), "A", "(B, H, T, T)", "the attention of this X")
    W_OV_all = torch.stack([W_OV(attn, h) for h in range(attn.H)])  # (H, d, d)
    return torch.einsum("bhts,bsd,hde->bhte", A, X, W_OV_all)  # (B, H, T, d)


def scores(attn: MultiHeadAttention, X: torch.Tensor) -> torch.Tensor:
    """S^h = X W_QK^h X^T / sqrt(d_head) for every head, before the causal mask: (B, H, T, T)."""
    X = validation.batch(X, attn.W_O.shape[0])
    W_QK_all = torch.stack([W_QK(attn, h) for h in range(attn.H)])  # (H, d, d)
    return torch.einsum("btd,hde,bse->bhts", X, W_QK_all, X) / math.sqrt(attn.d_head)


# softmax(S^h + M) of the recomputed scores against the recorded A^h: float32 rounding of the same
# products summed in another order moves entries of A by about 1e-6 (measured on the course models).
FORWARD_SCORES_TOLERANCE = 1e-5


@reads_model
@torch.no_grad()
def forward_scores(model: GPT, cache: Cache, l: int) -> torch.Tensor:
    """S^h for every head of layer l, as that layer's attention computed them in the cached pass: (B, H, T, T).

    The scores are those the module itself forms, its own queries and keys (attn.qkv) of the input it
    read, Q^h K^h^T / sqrt(d_head), before the causal mask M; nothing is rebuilt from W_QK^h. They are
    tied to the forward pass: softmax(S^h + M) must give back the A^h the cache recorded, to
    FORWARD_SCORES_TOLERANCE, or a ValueError says so (a cache of another model or input, or an
    attention that does not compute softmax(Q K^T / sqrt(d_head) + M)).
    """
    l = validation.integer("layer l", l, at_least=0, at_most=model.config.L - 1)
    attn = model.blocks[l].attn
    q, k, _ = attn.qkv(attention_input(model, cache, l))  # each (B, H, T, d_head)
    S = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, T, T)
    A = cache.A(l)  # (B, H, T, T), recorded by the forward pass
    if A.shape != S.shape:
        raise ValueError(f"layer {l}: the cache's A^h has shape {tuple(A.shape)}, this model's scores {tuple(S.shape)}: "
                         "the cache was made by another model or input")
    gap = float(((S + attn.mask(S.shape[-1], S.dtype, S.device)).softmax(-1) - A).abs().max())
    if not gap <= FORWARD_SCORES_TOLERANCE:
        raise ValueError(f"layer {l}: softmax(S^h + M) of this module's queries and keys misses the recorded A^h "
                         f"by {gap:.1e} (> {FORWARD_SCORES_TOLERANCE:g}): the cache was made by another model or input")
    return S


@dataclass(frozen=True)
class NumericalRank:
    """Singular values (descending), the tolerance below which they count as zero, and the rank."""

    singular_values: torch.Tensor
    tolerance: float
    rank: int


def numerical_rank(M: torch.Tensor, rtol: float | None = None) -> NumericalRank:
    """The number of singular values of M above tol = rtol * sigma_max.

    The default rtol is max(m, n) * machine epsilon of M's dtype, the rule numpy and
    torch.linalg.matrix_rank use; exact rank deficits then show as a gap of many orders
    of magnitude between sigma_rank and sigma_rank+1.
    """
    if not isinstance(M, torch.Tensor) or M.dim() != 2 or not M.dtype.is_floating_point:
        raise ValueError("M must be a 2-D floating-point tensor")
    if rtol is None:
        rtol = max(M.shape) * torch.finfo(M.dtype).eps
    rtol = validation.real("rtol", rtol, at_least=0)  # NaN or inf would count every singular value as 0
    sigma = torch.linalg.svdvals(M.detach())  # descending
    tolerance = float(sigma[0]) * rtol if sigma.numel() else 0.0
    return NumericalRank(sigma, tolerance, int((sigma > tolerance).sum()))


@dataclass(frozen=True)
class HeadRanks:
    """Exercise 6 for one head: the numerical ranks of its circuits and of S^h, and how sharp the cut is."""

    layer: int
    head: int
    rank_W_QK: int
    rank_W_OV: int
    rank_S: int  # of the forward pass's S^h (forward_scores) on the cache's first sequence, before the mask
    cut_W_OV: float  # sigma_{d_head} / sigma_{d_head + 1} of W_OV^h: the drop after the rank bound
    spread_W_OV: float  # sigma_1 / sigma_{d_head} of W_OV^h: how unevenly the head uses its d_head directions
    spread_W_QK: float  # sigma_1 / sigma_{d_head} of W_QK^h


@reads_model
@torch.no_grad()
def head_ranks(model: GPT, cache: Cache) -> list[HeadRanks]:
    """HeadRanks for every head of every layer; S^h is the one the cached forward pass computed (forward_scores)."""
    k = model.config.d_head  # sigma_k is sigma[k - 1] in code
    rows = []
    for l, block in enumerate(model.blocks):
        S = forward_scores(model, cache, l)[0]  # (H, T, T)
        for h in range(model.config.H):
            qk, ov = numerical_rank(W_QK(block.attn, h)), numerical_rank(W_OV(block.attn, h))
            sv_qk, sv_ov = qk.singular_values, ov.singular_values
            cut = float(sv_ov[k - 1] / sv_ov[k]) if k < len(sv_ov) else math.inf  # H = 1: nothing after sigma_d
            spreads = float(sv_ov[0] / sv_ov[k - 1]), float(sv_qk[0] / sv_qk[k - 1])
            rows.append(HeadRanks(l, h, qk.rank, ov.rank, numerical_rank(S[h]).rank, cut, *spreads))
    return rows


def format_head_ranks(rows: list[HeadRanks], d_head: int) -> str:
    """The table of head_ranks, one line per head."""
    k = d_head
    lines = [f"{'layer':>5} {'head':>4}  {'rank W_QK':>9} {'rank W_OV':>9} {'rank S^h':>8}   "
             f"W_OV: sigma_{k}/sigma_{k + 1}  sigma_1/sigma_{k}   W_QK: sigma_1/sigma_{k}"]
    lines += [f"{r.layer:>5} {r.head:>4}  {r.rank_W_QK:>9} {r.rank_W_OV:>9} {r.rank_S:>8}   "
              f"{r.cut_W_OV:>17.1e} {r.spread_W_OV:>14.0f} {r.spread_W_QK:>17.0f}" for r in rows]
    return "\n".join(lines)


def random_invertible(n: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """A random well-conditioned invertible n x n matrix: Q diag(s) with Q orthogonal, s in [0.5, 2]."""
    n = validation.integer("n", n, at_least=1)
    Q, _ = torch.linalg.qr(torch.randn(n, n, generator=generator, dtype=torch.float64))
    s = 0.5 + 1.5 * torch.rand(n, generator=generator, dtype=torch.float64)
    return (Q * s).float()  # (n, n)


def _inverse(R: torch.Tensor, d_head: int, name: str) -> torch.Tensor:
    R = validation.tensor_of_shape(R, (d_head, d_head), name, "(d_head, d_head)", "a matrix")
    if numerical_rank(R.double()).rank < d_head:
        raise ValueError(f"{name} must be invertible (Remark 1.3 needs R in GL(d_head)); it is singular")
    return torch.linalg.inv(R.double()).to(R.dtype)


@reads_model
@torch.no_grad()
def gauge_transform(
    model: GPT, layer: int, h: int, R_qk: torch.Tensor | None = None, R_ov: torch.Tensor | None = None
) -> GPT:
    """A copy of `model` with head h of `layer` reparametrized (Remark 1.3, Exercise 3).

    R_qk: W_Q^h -> W_Q^h R_qk and W_K^h -> W_K^h R_qk^{-T}, so W_QK^h is unchanged.
    R_ov: W_V^h -> W_V^h R_ov and W_O^h -> R_ov^{-1} W_O^h, so W_OV^h is unchanged.
    The original model is not modified.
    """
    layer = validation.integer("layer", layer, at_least=0, at_most=model.config.L - 1)
    new = copy.deepcopy(model)
    attn = new.blocks[layer].attn
    h = _check_head(attn, h)
    if R_qk is not None:
        R_inv = _inverse(R_qk, attn.d_head, "R_qk")
        attn.W_Q[h] = attn.W_Q[h] @ R_qk
        attn.W_K[h] = attn.W_K[h] @ R_inv.T
    if R_ov is not None:
        R_inv = _inverse(R_ov, attn.d_head, "R_ov")
        rows = slice(h * attn.d_head, (h + 1) * attn.d_head)
        attn.W_V[h] = attn.W_V[h] @ R_ov
        attn.W_O[rows] = R_inv @ attn.W_O[rows]
    return new


@dataclass(frozen=True)
class FactorPairDimension:
    """Exercise 3 at one generic point: parameters 2 d d_head, Jacobian rank, their difference."""

    d: int
    d_head: int
    parameters: int  # 2 d d_head entries in (W_Q, W_K)
    jacobian_rank: int  # rank of D(W_Q, W_K) -> W_Q W_K^T
    fiber_dimension: int  # parameters - jacobian_rank; Exercise 3's answer is d_head^2


def factor_pair_dimension(d: int, d_head: int, seed: int = 0) -> FactorPairDimension:
    """Dimension of {(W_Q, W_K): W_Q W_K^T = M} for a generic M of rank d_head, measured.

    At a generic point (W_Q, W_K) in float64, the Jacobian of (W_Q, W_K) -> W_Q W_K^T is
    computed by autograd and its numerical rank taken (default tolerance of numerical_rank).
    By the constant-rank theorem the set of factor pairs near that point is a manifold of
    dimension 2 d d_head - rank. Keep d small: the Jacobian is d^2 x 2 d d_head.
    """
    if not (isinstance(d, int) and isinstance(d_head, int) and 1 <= d_head <= d):
        raise ValueError(f"need integers 1 <= d_head <= d, got d={d!r}, d_head={d_head!r}")
    generator = torch.Generator().manual_seed(seed)
    W_Q = torch.randn(d, d_head, generator=generator, dtype=torch.float64)
    W_K = torch.randn(d, d_head, generator=generator, dtype=torch.float64)
    J_Q, J_K = torch.autograd.functional.jacobian(lambda Q, K: Q @ K.T, (W_Q, W_K))  # (d, d, d, d_head) each
    J = torch.cat((J_Q.reshape(d * d, -1), J_K.reshape(d * d, -1)), dim=1)  # (d^2, 2 d d_head)
    rank = numerical_rank(J).rank
    return FactorPairDimension(d, d_head, 2 * d * d_head, rank, 2 * d * d_head - rank)


@dataclass(frozen=True)
class HeadBudget:
    """One row of Remark 1.4's comparison, each number measured from a MultiHeadAttention."""

    H: int
    d_head: int
    parameters: int  # numel of W_Q, W_K, W_V, W_O, b_O
    distributions_per_query: int  # rows A^h_t, one per head
    max_head_rank: int  # largest numerical rank of any W_QK^h, computed in float64


def head_budget_comparison(config: GPTConfig, T: int = 8) -> list[HeadBudget]:
    """Remark 1.4: the config's H heads against one full-width head (H = 1, d_head = d).

    Both modules are built fresh in float64 (seeded by the caller) and run on a random (1, T, d) input.
    """
    T = validation.integer("T", T, at_least=1)
    rows = []
    for H in (1, config.H):
        attn = MultiHeadAttention(config.replace(H=H)).double()  # float64: a d x d product is ill-conditioned
        for p in (attn.W_Q, attn.W_K, attn.W_V, attn.W_O):
            torch.nn.init.normal_(p, std=config.init_std)
        X = torch.randn(1, T, config.d, dtype=torch.float64)  # (1, T, d)
        with torch.no_grad():
            q, k, _ = attn.qkv(X)
            A = attn.attention_matrices(q, k)  # (1, H, T, T)
            ranks = [numerical_rank(W_QK(attn, h)).rank for h in range(H)]
        parameters = sum(p.numel() for p in attn.parameters())
        rows.append(HeadBudget(H, attn.d_head, parameters, A.shape[1], max(ranks)))
    return rows
