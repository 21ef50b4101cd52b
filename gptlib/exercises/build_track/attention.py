"""Build step 3, Definition 1.1: multi-head attention, [C^1 | ... | C^H] W_O + b_O."""

from __future__ import annotations

import torch
from torch import nn

from ...checking import roles
from ...checking.components import B, T, agreeing_reading, built, extra_note, loaded, random_weights, sizes
from ...checking.mistakes import Mistake
from ...checking.running import Wrong, checker
from ...config import GPTConfig
from ...model import MultiHeadAttention as ReferenceAttention
from .head import attention_run, head_mistakes, heads


def concatenated(C: torch.Tensor, how: str = "heads") -> torch.Tensor:
    """(B, H, T, d_head) -> (B, T, d): [C^1 | ... | C^H] ('heads'), or two wrong ways of joining them."""
    Bc, H, Tc, d_head = C.shape
    if how == "interleaved":  # feature j of head h at column j * H + h
        return C.permute(0, 2, 3, 1).reshape(Bc, Tc, H * d_head)
    if how == "no_transpose":  # (B, H, T, d_head) reshaped as if it were (B, T, H, d_head): positions mixed
        return C.reshape(Bc, Tc, H * d_head)
    return C.transpose(1, 2).reshape(Bc, Tc, H * d_head)


def read_attention(module: nn.Module, d: int, H: int, seed: int = 0, where: str = "attention") -> roles.Reading:
    readings = roles.attention_readings(module, d, H)
    notes, got, X = attention_run(module, readings, d, d, seed)

    def reference(r):
        attention = ReferenceAttention(GPTConfig(d=d, H=H, T_max=max(T, 8))).double()
        attention.forms_A = True  # every A^h formed, as a learner's attention forms them
        return loaded(attention, r.weights)(X)

    def mistakes(r):
        w = {k: v.double() for k, v in r.weights.items()}

        def joined(how="heads", bias=True):
            return lambda C: concatenated(C, how) @ w["W_O"] + (w["b_O"] if bias else 0)

        found = head_mistakes(X, w["W_Q"], w["W_K"], w["W_V"], joined())
        right = heads(X, w["W_Q"], w["W_K"], w["W_V"])
        found.update({
            Mistake("mha-heads-wrong-order",
                "your heads are joined in the wrong order: Definition 1.1 concatenates [C^1 | ... | C^H], head by head, "
            "before W_O (yours interleaves their features)"): lambda: joined("interleaved")(right),
            Mistake("mha-reshape-without-transpose",
                "you reshaped (B, H, T, d_head) to (B, T, d) without moving the head axis back next to d_head first: "
            "that mixes positions (transpose(1, 2) before the reshape)"): lambda: joined("no_transpose")(right),
            Mistake("mha-no-output-bias",
                "the output bias b_O is not added (Theorem 5.2's convention: a bias on the output projection)"):
                lambda: joined(bias=False)(right),
        })
        return found

    return agreeing_reading(got, readings, reference, mistakes, where, notes)


def heads_of(module: nn.Module, H: int | None) -> int:
    """H as given, else read from the module (an int attribute H, n_head, n_heads, num_heads or heads' length)."""
    if H is not None:
        return H
    for name in ("H", "n_head", "n_heads", "num_heads", "heads"):
        value = getattr(module, name, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, nn.ModuleList):
            return len(value)
    raise Wrong("cannot tell how many heads your module has: pass H=... to the checker", mistake="build-heads-unknown")


@checker("Build step 3: multi-head attention")
def check_multi_head_attention(attention, d: int | None = None, H: int | None = None) -> tuple[str, list[str]]:
    """Definition 1.1: `attention` is your class (built as MultiHeadAttention(d, H)) or a module; X (B, T, d) -> (B, T, d)."""
    if not isinstance(attention, nn.Module):
        d, H = d or sizes()["d"], H or sizes()["H"]
    module = built(attention, d, H, what=f"d={d}, H={H}")
    H = heads_of(module, H)
    d = d or next((p.shape[0] for p in module.parameters() if p.dim() == 2 and p.shape[0] == p.shape[1]), 0)
    with random_weights(module, seed=0):
        notes = extra_note(read_attention(module, d, H).extra)
    return ("equals gptlib's MultiHeadAttention, [C^1 | ... | C^H] W_O + b_O with the causal mask, under your "
            "weights set to random values, to within the float32 tolerance."), [f"d = {d}, H = {H}, input {(B, T, d)}", *notes]
