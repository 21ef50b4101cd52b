"""Reference solutions, one or more functions per exercise. Kept out of the notebooks: a learner
sees one only by asking, `show_solution(n)`, which prints its source and the argument behind it.
The tests run every solution through its checker."""

from __future__ import annotations

import torch

# ---- Exercise 1 ★ ---------------------------------------------------------------------------


def count(config) -> int:
    """Theorem 5.2 with gptlib's bias conventions (none on W_Q, W_K, W_V, W_U); W_U = E^T when tied."""
    V, T_max, d, L, d_ff = config.V, config.T_max, config.d, config.L, config.d_ff
    embeddings = V * d + T_max * d  # E and P
    attention = 3 * d * d + d * d + d  # H heads of W_Q, W_K, W_V (d x d/H each), W_O, b_O
    mlp = d_ff * d + d_ff + d * d_ff + d  # W_1, b_1, W_2, b_2
    layer_norms = 2 * (d + d)  # LN_1, LN_2: gamma and beta each
    final = 2 * d + (0 if config.tie_weights else d * V)  # LN_f, W_U
    return embeddings + L * (attention + mlp + layer_norms) + final


def rows(config) -> list[int]:
    """The lecture's five rows for an untied model: embeddings, attention, MLPs, block LayerNorms, LN_f + W_U."""
    V, T_max, d, L, d_ff = config.V, config.T_max, config.d, config.L, config.d_ff
    return [(V + T_max) * d, L * (4 * d * d + d), L * (2 * d * d_ff + d_ff + d), L * 4 * d, 2 * d + d * V]


# ---- Exercise 2 ★ ---------------------------------------------------------------------------


@torch.no_grad()
def dependency_map(model, idx) -> torch.Tensor:
    """M[t, s] = max_v |Z_{t,v}(x with x_s changed) - Z_{t,v}(x)| for one sequence idx (T,).

    Why it must be lower-triangular: embeddings, LayerNorms, MLPs, residual additions and the
    unembedding act on each position alone, so they cannot move information between positions.
    Attention is the only operation that does, and its weights on later positions are exactly 0
    after the mask. By induction over the layers, row t of every X^(l), hence Z_t, is a function
    of x_0..x_t only.
    """
    V = model.config.V
    Z = model(idx)  # (T, V)
    T = idx.shape[0]
    M = torch.zeros(T, T)
    for s in range(T):
        changed = idx.clone()
        changed[s] = (idx[s] + 1) % V
        M[:, s] = (model(changed) - Z).abs().amax(dim=-1)  # how much each row t moved
    return M


# ---- Exercise 3 -----------------------------------------------------------------------------


def factor_pair_dimension(d: int, d_head: int) -> int:
    """d_head^2. W_Q W_K^T = M with M of rank d_head forces col(W_Q) = col(M) and col(W_K) = row(M);
    then any other pair is (W_Q R, W_K R^-T) with R invertible d_head x d_head. So the set of pairs
    is a copy of GL(d_head), the group of invertible d_head x d_head matrices: an open subset of the
    d_head^2 entries of R, so of dimension d_head^2.
    (Check: 2 d d_head parameters minus the 2 d d_head - d_head^2 dimensions of rank-d_head matrices.)"""
    return d_head * d_head


# ---- Exercise 4 -----------------------------------------------------------------------------


def project(u: torch.Tensor) -> torch.Tensor:
    """Orthogonal projection onto 1-perp, row by row: u - mean(u) 1. (..., d) -> (..., d)."""
    return u - u.mean(dim=-1, keepdim=True)


def rescale(v: torch.Tensor, eps: float) -> torch.Tensor:
    """v / sqrt(sigma^2 + eps) with sigma^2 = mean(v^2) (divides by d); for eps = 0 the point
    sqrt(d) v / ||v|| on the sphere of radius sqrt(d). (..., d) -> (..., d)."""
    return v / torch.sqrt(v.pow(2).mean(dim=-1, keepdim=True) + eps)


def weight_decay_prediction(c: float) -> tuple[float, float]:
    """f_{cW} = f_W because LN(c W x) = LN(W x). Differentiating g(W) = loss(f_W) at cW: g(cW') = g(W'),
    so c grad g(cW) = grad g(W), i.e. the gradient is 1/c times as large. A step of plain gradient
    descent, relative to the weights, ||lr grad|| / ||cW||, is therefore 1/c^2 times as large:
    weight decay (c < 1) quietly raises the effective learning rate. (Under AdamW, whose per-coordinate
    normalisation keeps the step's length when the gradient grows, the relative step grows by 1/c only.)"""
    return 1 / c, 1 / c**2


# ---- Exercise 5 -----------------------------------------------------------------------------


def tied_count(config) -> int:
    """The untied count minus the d x V of W_U: with W_U = E^T the unembedding is E itself."""
    return count(config.replace(tie_weights=False)) - config.d * config.V


# ---- Exercise 6 -----------------------------------------------------------------------------


def head_circuits(attn, h: int) -> tuple[torch.Tensor, torch.Tensor]:
    """W_QK^h = W_Q^h (W_K^h)^T and W_OV^h = W_V^h W_O^h, with W_O^h the rows h d_head..(h+1) d_head of W_O."""
    d_head = attn.W_Q.shape[-1]
    W_O_h = attn.W_O[h * d_head : (h + 1) * d_head]  # (d_head, d)
    return attn.W_Q[h] @ attn.W_K[h].T, attn.W_V[h] @ W_O_h


def rank_bounds(d: int, H: int, T: int) -> tuple[int, int, int]:
    """Each circuit is a product through a d_head = d/H-dimensional middle: rank <= d_head. S^h is
    X W_QK^h X^T / sqrt(d_head), a T x T product through W_QK^h: rank <= min(T, d_head). Several heads
    do not remove the bound, they add H such low-rank terms (the sum can reach rank d)."""
    d_head = d // H
    return d_head, d_head, min(T, d_head)


# ---- Exercise 7 -----------------------------------------------------------------------------


def post_norm_jacobian(block, X: torch.Tensor) -> torch.Tensor:
    """The post-norm block Y = LN_1(X + MHA(X)), X' = LN_2(Y + MLP(Y)) from the block's parts, and
    its Jacobian by autograd; vec goes row by row, so the result is (T d, T d)."""
    T, d = X.shape

    def post_norm(x):  # x: vec(X), (T d,)
        Z = x.reshape(1, T, d)
        Y = block.ln_1(Z + block.attn(Z))
        return block.ln_2(Y + block.mlp(Y)).reshape(-1)

    return torch.autograd.functional.jacobian(post_norm, X.reshape(-1))


post_norm_statement = "b"  # the Jacobian is DLN_2 (I + DMLP) DLN_1 (I + DMHA): no bare identity


# ---- Exercise 8 -----------------------------------------------------------------------------


def flops_per_token(config, T: int) -> int:
    """Per token, forward: each weight of the blocks' matrices and of W_U is one multiply-add (2 FLOPs),
    2 L (4 d^2 + 2 d d_ff) + 2 d V, plus attention's scores and aggregation, 2 T d_head per head
    each, 4 L T d. Backward: twice the forward (one product for the input's gradient, one for the
    weights'). Total 3 x forward; 6N is the same without the 12 L T d of attention."""
    d, L = config.d, config.L
    forward = 2 * L * (4 * d * d + 2 * d * config.d_ff) + 2 * d * config.V + 4 * L * T * d
    return 3 * forward


def takeover_T(config) -> int:
    """Per block and sequence, attention's products cost 4 T^2 d, the projections 8 T d^2 and the
    MLP 4 T d d_ff: equal at T = 2d + d_ff (6d when d_ff = 4d). The 6N rule sees only the latter."""
    return 2 * config.d + config.d_ff


SOLUTIONS = {
    1: (count, rows),
    2: (dependency_map,),
    3: (factor_pair_dimension,),
    4: (project, rescale, weight_decay_prediction),
    5: (tied_count,),
    6: (head_circuits, rank_bounds),
    7: (post_norm_jacobian,),
    8: (flops_per_token, takeover_T),
}
