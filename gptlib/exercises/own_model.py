"""Bring your own model: one call checks a learner's GPT against what Lecture 5 says must hold.

    check_own_model(model, V=..., T_max=..., d=..., L=...)

`model` is anything mapping token ids (B, T) to logits (B, T, V); parameters are read only if it
is an nn.Module. Four checks, each its own verdict in one report:

    batch independence   a sequence's logits do not depend on the rest of its batch
    causality            Exercise 2: Z_t moves with x_0..x_t only
    parameter count      Theorem 5.2 for the model's own bias conventions: the weight matrices
                         must add up exactly; biases the theorem leaves out (or adds) are named,
                         row by row when the parameter names say which row they belong to
    initial loss         near ln V, as for a freshly initialized model (Project aside 5.2)
"""

from __future__ import annotations

import math
import re

import torch
import torch.nn.functional as F
from torch import nn

from .. import checks
from ..model import eval_mode
from .causal import batch_independence, causality_verdict, logits, tried_length
from .result import FAILED, NOT_ATTEMPTED, PASSED, Result, Wrong, checker

OWN = "Your own GPT"
LOSS_RTOL = 0.1  # initial loss within 10% of ln V

# Lecture rows recognised from parameter names: (row, pattern on one dotted name component).
# LayerNorm first, so "blocks.0.ln_1.weight" is a LayerNorm although it sits in a block.
ROW_PATTERNS = (
    ("LayerNorms", re.compile(r"^(ln.*|.*norm.*|gamma|beta)$", re.I)),
    ("attention", re.compile(r"^(.*attn.*|.*attention.*|[qkv]_?proj|W_[QKVO]|b_O|query|key|value|heads?|sa)$", re.I)),
    ("MLPs", re.compile(r"^(mlp.*|ffn?|ffwd|.*feed_?forward.*|fc\d*|W_[12]|b_[12])$", re.I)),
    ("embeddings", re.compile(r"^(E|P|wte|wpe|.*emb.*|tok.*|pos.*)$", re.I)),
    ("unembedding", re.compile(r"^(W_U|lm_head|unembed.*|output|b_U)$", re.I)),
)


def _row(name: str) -> str | None:
    for row, pattern in ROW_PATTERNS:
        if any(pattern.match(part) for part in name.split(".")):
            return row
    return None


def expected_rows(V: int, T_max: int, d: int, L: int, d_ff: int, tied: bool) -> dict[str, tuple[int, int]]:
    """Theorem 5.2 per row, split as (entries of weight matrices, entries of vectors)."""
    return {
        "embeddings": ((V + T_max) * d, 0),
        "attention": (L * 4 * d * d, L * d),  # W_Q, W_K, W_V, W_O; b_O
        "MLPs": (L * 2 * d * d_ff, L * (d_ff + d)),  # W_1, W_2; b_1, b_2
        "LayerNorms": (0, L * 4 * d + 2 * d),  # gamma, beta of LN_1, LN_2 per block and LN_f
        "unembedding": (0 if tied else d * V, 0),  # W_U
    }


def _bias_story(row: str, extra: int, V: int, d: int, L: int, d_ff: int) -> str:
    """Name a difference in a row's vectors, as a bias convention where one fits."""
    known = {
        ("attention", 3 * L * d): "biases on W_Q, W_K, W_V (3d per block), which Theorem 5.2 leaves out",
        ("attention", -L * d): "no output bias b_O",
        ("attention", 2 * L * d): "biases on W_Q, W_K, W_V but no b_O",
        ("MLPs", -L * (d_ff + d)): "no MLP biases b_1, b_2",
        ("unembedding", V): "a bias on W_U (V numbers), which Theorem 5.2 leaves out",
        ("LayerNorms", -(2 * L + 1) * d): "LayerNorms without shifts beta (or without gains)",
    }
    return known.get((row, extra), f"{extra:+,} vector entries")


@checker("parameter count")
def _count(model, V: int, T_max: int, d: int, L: int, d_ff: int, tied: bool | None) -> tuple[str, list[str]]:
    if not isinstance(model, nn.Module):
        raise Wrong("not an nn.Module, so its parameters cannot be counted (the other checks still apply).")
    params = list(model.named_parameters())  # shared tensors (tied E and W_U) appear once
    total = sum(p.numel() for _, p in params)
    if tied is None:
        tied = not any(p.shape in ((V, d), (d, V)) for name, p in params if _row(name) == "unembedding")
    expected = expected_rows(V, T_max, d, L, d_ff, tied)
    theorem = sum(m + v for m, v in expected.values())
    measured = {row: [0, 0] for row in expected}
    unplaced = []
    for name, p in params:
        row = _row(name)
        if row is None:
            unplaced.append(name)
        else:
            measured[row][p.dim() < 2] += p.numel()
    header = f"numel() = {total:,}; Theorem 5.2 ({'tied' if tied else 'untied'}, d_ff = {d_ff}) = {theorem:,}"
    if unplaced:  # names do not say the rows: compare totals of matrices and vectors
        matrices = sum(p.numel() for _, p in params if p.dim() >= 2)
        expected_matrices = sum(m for m, _ in expected.values())
        details = [header, f"rows not reported: names such as {unplaced[0]!r} do not say which row they belong to"]
        if matrices != expected_matrices:
            raise Wrong(f"the weight matrices hold {matrices:,} entries, Theorem 5.2's {expected_matrices:,}.", details)
        vector_gap = total - theorem
        vectors = f"the weight matrices match; vectors (biases, LayerNorms) differ by {vector_gap:+,}"
        note = "exactly Theorem 5.2" if not vector_gap else vectors
        return note + ".", details
    details, problems, conventions = [header], [], []
    for row, (m_exp, v_exp) in expected.items():
        m_got, v_got = measured[row]
        details.append(f"{row:<12} matrices {m_got:>10,} (theorem {m_exp:>10,})   vectors {v_got:>8,} (theorem {v_exp:>8,})")
        if m_got != m_exp:
            problems.append(f"{row}: weight matrices {m_got - m_exp:+,} entries")
        if v_got != v_exp:
            story = _bias_story(row, v_got - v_exp, V, d, L, d_ff)
            (problems if row == "LayerNorms" else conventions).append(f"{row}: {story}")
    details += [f"your bias convention: {c}" for c in conventions]
    if problems:
        raise Wrong("; ".join(problems) + ".", details)
    if conventions:
        return (f"the weight matrices and LayerNorms match Theorem 5.2; "
                f"your biases differ ({len(conventions)} row(s), named below)."), details
    return "every row equals Theorem 5.2.", details


@checker("batch independence")
def _batch(model, V: int, T: int, seed: int) -> tuple[str, list[str]]:
    with eval_mode(model):
        mixed = batch_independence(model, V, T, seed)
    if mixed:
        raise Wrong(mixed + " (BatchNorm, or a mean or softmax over the batch dimension, mixes examples).")
    return "each sequence's logits are the same alone as in a batch of three.", []


_causal = checker("causality")(causality_verdict)


@checker("initial loss")
def _initial_loss(model, V: int, T: int, seed: int) -> tuple[str, list[str]]:
    generator = torch.Generator().manual_seed(seed + 2)
    idx = torch.randint(0, V, (4, T + 1), generator=generator)
    with eval_mode(model):
        Z = logits(model, idx[:, :-1], V).double()  # (4, T, V)
    loss = F.cross_entropy(Z.reshape(-1, V), idx[:, 1:].reshape(-1)).item()
    verdict = f"initial loss {loss:.2f} vs ln V = {math.log(V):.2f}"
    if abs(loss - math.log(V)) > LOSS_RTOL * math.log(V):
        raise Wrong(
            f"{verdict}: not within {LOSS_RTOL:.0%}; at initialization the predictions should be close to uniform"
            " (weights too large? a trained model rightly fails this one)."
        )
    return f"{verdict}: within {LOSS_RTOL:.0%}, nearly uniform predictions as expected at initialization.", []


def check_own_model(
    model, *, V: int, T_max: int, d: int, L: int, d_ff: int | None = None, tied: bool | None = None, T: int = 8, seed: int = 0
) -> Result:
    """Check your own GPT (any module mapping ids (B, T) to logits (B, T, V)) against Lecture 5.

    Give its sizes: V, T_max, d, L, and d_ff if it is not 4d; `tied` says whether W_U = E^T
    (None: guessed from the parameters). T (default min(8, T_max)) is the length tried.
    Returns a report whose parts are the four verdicts; it passes when all four pass.
    """
    for name, value in (("V", V), ("T_max", T_max), ("d", d), ("L", L), ("d_ff", d_ff if d_ff is not None else 1)):
        checks.integer(name, value, at_least=1)
    T = tried_length(T, T_max)
    parts = (
        _batch(model, V, T, seed),
        _causal(model, V, T, seed),
        _count(model, V, T_max, d, L, d_ff or 4 * d, tied),
        _initial_loss(model, V, T, seed),
    )
    if any(part.status == NOT_ATTEMPTED for part in parts):
        return Result(OWN, NOT_ATTEMPTED, "your model still raises NotImplementedError.")
    failing = [part.exercise for part in parts if not part.passed]
    if failing:
        return Result(OWN, FAILED, f"{', '.join(failing)}: see below.", (), parts)
    return Result(OWN, PASSED, "all four checks pass.", (), parts)
