"""Progressive hints, `hint(n, level)`, and `show_solution(n)` (the reference source, on request)."""

from __future__ import annotations

import inspect

from . import solutions

HINTS = {
    1: (
        "Walk the specification of Section 5 from the token ids to the logits and write down every tensor "
        "that has a name in gptlib/model.py (E, P, W_Q, ..., gamma, beta, W_U) with its shape.",
        "Per block: W_Q, W_K, W_V have H blocks of d x d/H each; W_O is d x d with a bias b_O; the MLP has "
        "W_1 (d_ff x d), b_1, W_2 (d x d_ff), b_2; two LayerNorms with d gains and d shifts each.",
        "Do not forget what is outside the blocks: P, the final LayerNorm, and W_U (which is E^T, no new "
        "parameters, when config.tie_weights).",
    ),
    2: (
        "Run the model on a sequence and on a copy where only x_s is changed; which rows of the logits move?",
        "Do it for every s and collect the changes in a T x T table M[t, s] (max over the vocabulary of "
        "|Z_t changed - Z_t|). Change a clone, never the original ids.",
        "For the proof: which operations of Section 5 mix positions? Only attention; what are its weights "
        "on later positions after the mask? Then induct over the layers.",
    ),
    3: (
        "Remark 1.3: if R is invertible, (W_Q R, W_K R^-T) gives the same W_QK. Are there any other pairs?",
        "If W_Q W_K^T = W_Q' W_K'^T has rank d_head, the columns of W_Q and W_Q' span the same space, so W_Q' = W_Q R.",
        "The set of pairs is then parametrized by R in GL(d_head): how many free entries does R have?",
    ),
    4: (
        "Part 1: both moves act on the last dimension only; project takes one number away from each row, rescale "
        "divides each row by one number. Part 2: what is LN(c W x) for c > 0, and so what is loss(c W)?",
        "Part 1: project subtracts each row's mean; rescale divides by sqrt(sigma^2 + eps) with sigma^2 = mean(v^2): "
        "divide by d, not d - 1 (torch.var's default), and keep eps under the square root. Part 2: loss(c W) = "
        "loss(W) for every W; differentiate both sides with respect to W.",
        "Part 2: the chain rule gives c * grad(c W) = grad(W), so the gradient grows by 1/c while ||c W|| shrinks by c: "
        "the relative step lr * ||grad|| / ||W|| grows by 1/c^2.",
    ),
    5: (
        "Which single matrix disappears when W_U = E^T? Nothing else changes.",
        "E stays (it now serves both ends); W_U had d x V entries.",
    ),
    6: (
        "W_QK^h = W_Q^h (W_K^h)^T and W_OV^h = W_V^h W_O^h, where W_O^h is a block of d_head ROWS of W_O.",
        "The rank of a product is at most its inner dimension. What is the inner dimension of each circuit?",
        "S^h is T x T, and it equals X W_QK^h X^T / sqrt(d_head): two bounds apply, take the smaller.",
    ),
    7: (
        "Write the post-norm block as a function: Y = LN_1(X + MHA(X)), X' = LN_2(Y + MLP(Y)), using "
        "block.ln_1, block.attn, block.mlp, block.ln_2 on a (1, T, d) tensor.",
        "Flatten X row by row (X.reshape(-1)) and let torch.autograd.functional.jacobian (or torch.func.jacrev) "
        "differentiate the flattened map; the result is (T d, T d).",
        "For the statement: apply the chain rule to X' = LN_2(Y + MLP(Y)) from the outside in, then to "
        "Y = LN_1(X + MHA(X)). Which factors does the straight path from X to X' (through both additions) pass through?",
    ),
    8: (
        "A weight used once per token is one multiply-add (2 FLOPs) forward; the backward pass needs two "
        "products of the same size (input gradient and weight gradient).",
        "Weights per block: 4 d^2 in attention, 2 d d_ff in the MLP; plus d V for W_U. E and P are lookups: no "
        "FLOPs. Attention also computes Q K^T and A V: 2 T d FLOPs each per token per block, forward.",
        "For the takeover: per block and sequence compare 4 T^2 d with 8 T d^2 + 4 T d d_ff and solve for T.",
    ),
}


def _check_exercise(n) -> None:
    if n not in HINTS:
        raise ValueError(f"exercises are numbered 1 to 8, got {n!r}")


def hint(n: int, level: int = 1) -> None:
    """Print hint `level` (1 = a nudge, higher = more) for Exercise n."""
    _check_exercise(n)
    hints = HINTS[n]
    if not isinstance(level, int) or not 1 <= level <= len(hints):
        raise ValueError(f"Exercise {n} has hint levels 1 to {len(hints)}, got {level!r}")
    more = f" (more: hint({n}, {level + 1}))" if level < len(hints) else f" (last hint; the solution: show_solution({n}))"
    print(f"Exercise {n}, hint {level} of {len(hints)}{more}:\n{hints[level - 1]}")


def solution_source(n: int) -> str:
    """The source of Exercise n's reference solution(s)."""
    _check_exercise(n)
    parts = [inspect.getsource(fn) for fn in solutions.SOLUTIONS[n]]
    if n == 7:
        parts.append(f'post_norm_statement = "{solutions.post_norm_statement}"\n')
    return "\n\n".join(parts)


def show_solution(n: int) -> None:
    """Print Exercise n's reference solution(s), with the argument in each docstring."""
    print(f"# Exercise {n}: reference solution (gptlib/exercises/solutions.py)\n\n{solution_source(n)}")
