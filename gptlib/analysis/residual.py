"""Measurements of the residual stream (Lecture 5, Remarks 3.2 and 3.4, Empirical aside 3.5,
and Project aside 5.2's variance of the 2L residual writes at initialization).

Remark 3.2's Euler-step view is euler_flow (a stack of blocks with branch h F) against
rk4_flow (the ODE solved accurately); Remark 3.4's superposition clause is
superposition_readout.

All functions take any GPT (random or trained) and token batches, and read the stream from
gptlib.run_with_cache, so they measure exactly the model's own forward pass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .. import validation
from ..config import COURSE_CONFIG, GPTConfig
from ..model import GPT
from ..reproducibility import seeded
from .cache import Cache, reads_model, run_with_cache


def _row_norms(X: torch.Tensor) -> torch.Tensor:
    return torch.linalg.vector_norm(X, dim=-1)  # (B, T, d) -> (B, T)


def stream_norms(cache: Cache) -> torch.Tensor:
    """Remark 3.2: the mean over positions of ||X_t^(l)|| for l = 0..L, shape (L + 1,)."""
    return torch.stack([_row_norms(cache.X(l)).mean() for l in range(cache.n_layers + 1)])


def cosine_to_initial(cache: Cache) -> torch.Tensor:
    """Remark 3.4: the mean over positions of cos(X_t^(l), X_t^(0)) for l = 0..L, shape (L + 1,)."""
    X0 = cache.X(0)
    return torch.stack([F.cosine_similarity(cache.X(l), X0, dim=-1).mean() for l in range(cache.n_layers + 1)])


@reads_model
def injected_direction_readout(
    model: GPT, idx: torch.Tensor, directions: torch.Tensor, after_block: int = 0
) -> torch.Tensor:
    """Remark 3.4: write a direction w (d,) into X^(l0+1), l0 = after_block, at every position,
    run the remaining blocks, and read it back at each later layer by projection:
    coefficient(l) = mean_t <X'_t^(l) - X_t^(l), w> / ||w||^2 for l = l0+1..L.

    `directions` is one w (d,) or n of them (n, d), each injected on its own (all n run through
    the blocks as one batch); the result is (L - l0,) or (n, L - l0). 1 means w arrives intact;
    the identity path of a pre-norm block carries it unchanged.
    """
    L = model.config.L
    after_block = validation.integer("after_block", after_block, at_least=0, at_most=L - 1)
    d = model.config.d
    if not isinstance(directions, torch.Tensor) or not directions.dtype.is_floating_point:
        raise ValueError(f"directions must be a floating-point torch.Tensor (d,) or (n, d), got {type(directions).__name__}")
    if directions.dim() not in (1, 2) or directions.shape[-1] != d:
        raise ValueError(f"directions must be one w (d,) or n of them (n, d), d = {d}; got shape {tuple(directions.shape)}")
    W = directions.reshape(-1, d)  # (n, d)
    _, cache = run_with_cache(model, idx)
    X = cache.X(after_block + 1)  # (B, T, d)
    B, T, _ = X.shape
    X = (X.unsqueeze(0) + W[:, None, None, :]).reshape(-1, T, d)  # (n B, T, d): every w on its own copy
    coefficients = []
    for l in range(after_block + 1, L + 1):
        change = X.reshape(-1, B, T, d) - cache.X(l)  # (n, B, T, d)
        coefficients.append(torch.einsum("nbtd,nd->n", change, W) / (B * T) / (W * W).sum(dim=1))  # (n,)
        if l < L:
            X = model.blocks[l](X)
    return torch.stack(coefficients, dim=-1).reshape(*directions.shape[:-1], L - after_block)


def euler_flow(F, X0: torch.Tensor, t: float, steps: int) -> torch.Tensor:
    """Remark 3.2: `steps` forward-Euler steps of size h = t / steps for dX/ds = F(X), from X0.

    Each step X <- X + h F(X) is a residual block whose branch is h F, so `steps` is the depth
    and a stack of blocks that share F traces the ODE's solution up to time t. F maps a tensor
    to one of the same shape.
    """
    steps = validation.integer("steps", steps, at_least=1)
    h, X = validation.real("t", t, above=0) / steps, X0
    for _ in range(steps):
        X = X + h * F(X)
    return X


def rk4_flow(F, X0: torch.Tensor, t: float, steps: int) -> torch.Tensor:
    """The same ODE dX/ds = F(X) by the classical fourth-order Runge-Kutta method: a reference
    solution whose error falls like h^4, against the h of euler_flow."""
    steps = validation.integer("steps", steps, at_least=1)
    h, X = validation.real("t", t, above=0) / steps, X0
    for _ in range(steps):
        k1 = F(X)
        k2 = F(X + h / 2 * k1)
        k3 = F(X + h / 2 * k2)
        k4 = F(X + h * k3)
        X = X + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return X


def random_directions(n: int, d: int, seed: int = 0) -> torch.Tensor:
    """n unit vectors in R^d drawn uniformly (normalized Gaussians), float64: shape (n, d)."""
    n, d = validation.integer("n", n, at_least=1), validation.integer("d", d, at_least=1)
    seed = validation.seed("seed", seed)
    W = torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return W / torch.linalg.vector_norm(W, dim=1, keepdim=True)


@dataclass(frozen=True)
class SuperpositionReadout:
    """Remark 3.4's superposition clause, measured for n directions in a stream of width d."""

    max_cos: float  # the largest |cos| between two different directions
    recovered: tuple[float, ...]  # per k asked for: fraction of trials whose k largest read-outs are the active features
    dense_error: float  # relative error of the best linear recovery of n dense values from their sum


def superposition_readout(W: torch.Tensor, ks, trials: int = 200, seed: int = 0) -> SuperpositionReadout:
    """Remark 3.4's superposition clause: n feature directions W (n, d) sharing a stream of width d.

    In each trial a random order of the n features is drawn, and for each k in `ks` the first k
    are active with value 1, written as x = sum of their directions (d,); each feature is read
    back linearly as <w_i, x>. Every k sees the same trials. The dense recovery (least squares)
    is exact to rounding when the n directions are independent (n <= d), and fails when n > d:
    d coordinates carry at most d independent values.
    """
    if not isinstance(W, torch.Tensor) or W.dim() != 2 or not W.dtype.is_floating_point or 0 in W.shape:
        raise ValueError(f"W must be n >= 1 feature directions (n, d), a floating-point tensor, got "
                         f"{tuple(W.shape) if isinstance(W, torch.Tensor) else type(W).__name__}")
    seed = validation.seed("seed", seed)
    n, d = W.shape
    if not isinstance(ks, (list, tuple, range)):
        raise ValueError(f"ks must be a list, tuple or range of k values, e.g. (1, 4), got {ks!r}")
    ks = [validation.integer("k", k, at_least=1, at_most=n) for k in ks]
    trials = validation.integer("trials", trials, at_least=1)
    generator = torch.Generator().manual_seed(seed)
    cos = W @ W.T / torch.outer(W.norm(dim=1), W.norm(dim=1))  # (n, n)
    max_cos = (cos - torch.eye(n, dtype=W.dtype)).abs().max().item() if n > 1 else 0.0
    hits = [0] * len(ks)
    for _ in range(trials):
        order = torch.randperm(n, generator=generator)  # (n,)
        for i, k in enumerate(ks):
            x = W[order[:k]].sum(dim=0)  # (d,)
            read = W @ x  # (n,)
            hits[i] += set(read.topk(k).indices.tolist()) == set(order[:k].tolist())
    values = torch.randn(n, generator=generator, dtype=W.dtype)  # (n,) dense feature values
    recovered = torch.linalg.lstsq(W.T, (values @ W).unsqueeze(1)).solution.squeeze(1)  # (n,)
    dense_error = ((recovered - values).norm() / values.norm()).item()
    return SuperpositionReadout(max_cos, tuple(h / trials for h in hits), dense_error)


@dataclass(frozen=True)
class BranchWriteRatios:
    """Per block l, the mean over positions of ||write|| / ||stream it is added to||."""

    attn: torch.Tensor  # (L,): ||MHA write of block l|| / ||X^(l)||
    mlp: torch.Tensor  # (L,): ||MLP write of block l|| / ||Y^(l)||


def branch_write_ratios(cache: Cache) -> BranchWriteRatios:
    """Empirical aside 3.5: how small each branch's write is next to the stream it is added to."""
    L = cache.n_layers
    attn = [(_row_norms(cache.attn_write(l)) / _row_norms(cache.X(l))).mean() for l in range(L)]
    mlp = [(_row_norms(cache.mlp_write(l)) / _row_norms(cache.Y(l))).mean() for l in range(L)]
    return BranchWriteRatios(torch.stack(attn), torch.stack(mlp))


class _SkippedBlock(nn.Module):
    """Stands in for a dropped block: X' = X."""

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        return X


@dataclass(frozen=True)
class BlockDropLosses:
    """The mean cross-entropy with every block, and with each block l dropped in turn."""

    base: torch.Tensor  # scalar
    dropped: torch.Tensor  # (L,): dropped[l] - base is what block l is worth


@reads_model
@torch.no_grad()
def block_drop_losses(model: GPT, idx: torch.Tensor, targets: torch.Tensor) -> BlockDropLosses:
    """Empirical aside 3.5: the mean cross-entropy with all blocks, and with block l dropped (X^(l+1) = X^(l)).

    The model's own forward pass runs with one block swapped for the identity, then restored.
    """
    _, base = model(idx, targets)
    dropped = []
    for l in range(model.config.L):
        block = model.blocks[l]
        model.blocks[l] = _SkippedBlock()
        try:
            dropped.append(model(idx, targets)[1])
        finally:
            model.blocks[l] = block
    return BlockDropLosses(base, torch.stack(dropped))


@dataclass(frozen=True)
class WriteVariance:
    """Project aside 5.2's two variances per coordinate; they agree when the 2L writes are uncorrelated."""

    accumulated: float  # Var(X^(L) - X^(0)), the variance of the summed writes
    independent: float  # the sum of the 2L writes' own variances


def residual_write_variance(
    L: int, scaled: bool, base: GPTConfig = COURSE_CONFIG, B: int = 4, seed: int = 0
) -> WriteVariance:
    """Project aside 5.2 at initialization: variance of the sum of the 2L residual writes.

    Builds base.replace(L=L) with seed `seed`; when `scaled` is False, W_O and W_2 are redrawn
    with the unscaled std (no 1/sqrt(2L)), and runs B random sequences of length T_max. The
    aside's idealization is that the writes are uncorrelated, so the two variances agree. The
    global random generator is left as it was.
    """
    config = base.replace(L=L)
    B, seed = validation.integer("B", B, at_least=1), validation.seed("seed", seed)
    with seeded(seed):
        model = GPT(config).eval()
        if not scaled:
            with torch.no_grad():
                for block in model.blocks:
                    block.attn.W_O.normal_(0.0, config.init_std)
                    if not config.attn_only:
                        block.mlp.W_2.normal_(0.0, config.init_std)
        idx = torch.randint(0, config.V, (B, config.T_max))
    with torch.no_grad():
        _, cache = run_with_cache(model, idx)
    writes = [cache.attn_write(l) for l in range(L)]
    if not config.attn_only:
        writes += [cache.mlp_write(l) for l in range(L)]
    return WriteVariance(
        accumulated=(cache.X(L) - cache.X(0)).var().item(),
        independent=sum(write.var().item() for write in writes),
    )


def initial_loss_gap(config: GPTConfig = COURSE_CONFIG, B: int = 8, seed: int = 0) -> tuple[float, float]:
    """(loss of a freshly initialized model on random tokens, ln V): Project aside 5.2's 'near ln 65'."""
    B, seed = validation.integer("B", B, at_least=1), validation.seed("seed", seed)
    with seeded(seed):
        model = GPT(config).eval()
        idx = torch.randint(0, config.V, (B, config.T_max))
    with torch.no_grad():
        _, loss = model(idx, idx.roll(-1, dims=1))
    return loss.item(), math.log(config.V)
