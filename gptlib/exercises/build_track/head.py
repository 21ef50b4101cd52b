"""Build step 2, one causal head of Definition 1.1; and the typical mistakes inside every head, which
multi-head attention (build.attention) shares."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ...checking import roles
from ...checking.components import B, T, agreeing_reading, built, extra_note, inputs, output, random_weights, sizes, zero_extra
from ...checking.mistakes import Mistake
from ...checking.running import Wrong, checker

HIDDEN_DIAGONAL = Mistake("head-mask-hides-diagonal",
    "your mask also hides the diagonal (s >= t): position t must see itself, so mask only s > t (triu(diagonal=1))")


def refuse_nan_at_start(got: torch.Tensor) -> None:
    """Output (B, T, ...) that is NaN at t = 0 only: softmax over a row that is all -inf, the diagonal hidden."""
    bad = ~torch.isfinite(got).reshape(*got.shape[:2], -1).all(-1)  # (B, T)
    if bad[:, 0].all() and not bad[:, 1:].any():
        raise Wrong(HIDDEN_DIAGONAL + ": at t = 0 nothing is left to attend to, and a softmax of all -inf is NaN.",
                    mistake=HIDDEN_DIAGONAL.id)


FINITE_FILL = -1e9  # a mask written with a large negative number instead of -inf


def heads(X, W_Q, W_K, W_V, *, mask: str = "future", scale: str = "d_head", softmax_dim: int = -1) -> torch.Tensor:
    """C^h = A^h X W_V^h for every head, (B, H, T, d_head), with switches for the typical mistakes.
    W_* (H, d, d_head). mask: 'future' (s > t hidden, right), 'diagonal' (s >= t), 'ahead' (s > t + 1),
    'none', 'after' (future zeroed after the softmax). scale: 'd_head' (right), 'd', 'none', 'd_head_not_sqrt'."""
    d_head = W_Q.shape[-1]
    q, k, v = (torch.einsum("btd,hde->bhte", X, W) for W in (W_Q, W_K, W_V))  # (B, H, T, d_head)
    S = q @ k.transpose(-2, -1)  # (B, H, T, T)
    S = S / {"d_head": math.sqrt(d_head), "d": math.sqrt(X.shape[-1]), "none": 1.0, "d_head_not_sqrt": d_head}[scale]
    n = S.shape[-1]
    hidden = {"future": 1, "diagonal": 0, "ahead": 2, "none": n, "after": n}[mask]
    hide = torch.ones(n, n, dtype=torch.bool).triu(hidden)
    A = S.masked_fill(hide, FINITE_FILL if mask == "diagonal" else float("-inf")).softmax(dim=softmax_dim)
    if mask == "after":
        A = A.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), 0.0)
    return A @ v


def head_mistakes(X, W_Q, W_K, W_V, combine) -> dict:
    """{message: thunk} of the typical mistakes inside a head; combine(C) turns (B, H, T, d_head) into the output."""

    def variant(**switches):
        return lambda: combine(heads(X, W_Q, W_K, W_V, **switches))

    return {
        HIDDEN_DIAGONAL: variant(mask="diagonal"),
        Mistake("head-mask-off-by-one",
            "your mask is off by one: position t also sees t + 1; hide every s > t (triu(diagonal=1))"): variant(mask="ahead"),
        Mistake("head-no-mask",
            "there is no causal mask: position t sees the future; set the scores of s > t to -inf before the softmax"):
            variant(mask="none"),
        Mistake("head-mask-after-softmax",
            "you masked after the softmax: zeroing A's future entries leaves rows that do not sum to 1; "
        "set the scores to -inf before the softmax"): variant(mask="after"),
        Mistake("head-scale-sqrt-d",
            "the scores are divided by sqrt(d), the model width: Definition 1.1 divides by sqrt(d_head)"): variant(scale="d"),
        Mistake("head-no-scale", "the 1/sqrt(d_head) scaling of the scores is missing"): variant(scale="none"),
        Mistake("head-scale-d-head",
            "the scores are divided by d_head instead of sqrt(d_head)"): variant(scale="d_head_not_sqrt"),
        Mistake("head-softmax-wrong-axis",
            "your softmax runs over the wrong axis (the queries t, dim -2): each row t of A must sum to 1 over s"):
            variant(softmax_dim=-2),
    }


def attention_run(module: nn.Module, readings: list, d: int, width: int, seed: int):
    """(notes on zeroed extras, the learner's output (B, T, width) in float64, the input X (B, T, d) in float64)."""
    notes = zero_extra(module, readings[0].extra)
    X = inputs(B, T, d, seed=seed)
    got = output(module, X, (B, T, width), "X")
    refuse_nan_at_start(got)
    return notes, got, X.double()


def read_head(module: nn.Module, d: int, d_head: int, seed: int = 0) -> roles.Reading:
    readings = roles.head_readings(module, d, d_head)
    notes, got, X = attention_run(module, readings, d, d_head, seed)

    def per_head(r):
        return [r.weights[k].double()[None] for k in ("W_Q", "W_K", "W_V")]  # each (1, d, d_head)

    def reference(r):
        q, k, v = (X @ W[0] for W in per_head(r))
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    return agreeing_reading(got, readings, reference, lambda r: head_mistakes(X, *per_head(r), lambda C: C[:, 0]), "head", notes)


@checker("Build step 2: one attention head")
def check_attention_head(head, d: int | None = None, d_head: int | None = None) -> tuple[str, list[str]]:
    """One causal head: `head` is your class (built as AttentionHead(d, d_head)) or a module; X (B, T, d) -> (B, T, d_head)."""
    chosen = sizes()
    d, d_head = d or chosen["d"], d_head or chosen["d"] // chosen["H"]
    module = built(head, d, d_head, what=f"d={d}, d_head={d_head}")
    with random_weights(module, seed=0):
        notes = extra_note(read_head(module, d, d_head).extra)
    return ("equals softmax(Q K^T / sqrt(d_head) + M) V with the causal mask M, your W_Q, W_K, W_V set to random "
            "values, to within the float32 tolerance."), [f"d = {d}, d_head = {d_head}, input {(B, T, d)}", *notes]
