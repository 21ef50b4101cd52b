"""Which of a learner's tensors is which symbol of the lecture: by shape, by name where a name says
it, and otherwise every reading the shapes allow (the build checkers keep the one that behaves).

A learner's module may hold nn.Linear weights (out, in) or raw Parameters used as X @ W (in, out),
per-head tensors (H, d, d_head), one tensor per head, one fused (3d, d) Q|K|V matrix, or Q, K, V
stacked in one tensor along a first axis of 3 ((3, d_head, d) for one head, (3, H, d_head, d), ...). Every
function here returns *candidates*: readings of the module in gptlib's own layout (the shapes of
gptlib.model), most likely first. A square matrix can be read either way round, so both readings
are candidates; so are the orders of same-shaped tensors whose names do not say their role.
Tensors the lecture has no place for are returned as `extra` (biases on W_Q, W_K, W_V or W_U):
the checkers zero them before comparing, and say so.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field

import torch
from torch import nn

from .running import Wrong

# A role is recognised by one dotted component of a parameter's name (case-insensitive).
HINTS = {
    "Q": r"q|query|queries|w_?q|q_?proj|to_q",
    "K": r"k|key|keys|w_?k|k_?proj|to_k",
    "V": r"v|value|values|w_?v|v_?proj|to_v",
    "O": r"o|out|proj|w_?o|b_?o|o_?proj|c_proj|out_proj|dense|wo",
    "1": r"w_?1|b_?1|fc|fc_?1|c_fc|up|up_proj|lin_?1|linear_?1|in_proj|hidden",
    "2": r"w_?2|b_?2|fc_?2|proj|c_proj|down|down_proj|lin_?2|linear_?2|out_proj|mlp_proj|out|output",
    "gain": r"gamma|weight|g|gain|scale|w",
    "shift": r"beta|bias|b|shift",
    "U": r"w_?u|lm_head|unembed.*|head|output|out|readout|logits?|b_?u",
    "P": r"p|pos.*|wpe|w_?pos|position.*",
    "LN_1": r"ln_?1|norm_?1|layer_?norm_?1|ln_?attn|attn_?norm|input_layernorm",
    "LN_2": r"ln_?2|norm_?2|layer_?norm_?2|ln_?mlp|mlp_?norm|ffn_?norm|post_attention_layernorm",
}


def says(name: str, role: str) -> bool:
    """Does one dotted component of the parameter name `name` name `role` (HINTS)?"""
    pattern = re.compile(rf"^({HINTS[role]})$", re.I)
    return any(pattern.match(part) for part in name.split(".") if part not in ("weight", "bias") or role in ("gain", "shift"))


def own_name(name: str) -> str:
    """The component of a parameter's name that says what it is: 'ln.weight' -> 'weight', 'gamma' -> 'gamma'."""
    return name.rsplit(".", 1)[-1]


def ordered(names: list[str], roles: list[str], hint=says) -> list[tuple[str, ...]]:
    """Orders of `names` to try for `roles` (len equal): one order if the names say every role,
    else the registration order first, then every other permutation."""
    by_hint = [next((n for n in names if hint(n, role)), None) for role in roles]
    if None not in by_hint and len(set(by_hint)) == len(roles):
        return [tuple(by_hint)]
    perms = list(itertools.permutations(names))
    return [tuple(names)] + [p for p in perms if p != tuple(names)]


def orientations(t: torch.Tensor, rows: int, cols: int) -> list[torch.Tensor]:
    """t read as a (rows, cols) matrix acting as X @ W: itself, or its transpose (nn.Linear's (out, in));
    both when square. Empty if neither shape fits."""
    if t.dim() != 2:
        return []
    return [W for W, fits in ((t, tuple(t.shape) == (rows, cols)), (t.T, tuple(t.shape) == (cols, rows))) if fits]


@dataclass
class Reading:
    """One way of reading the learner's tensors: {symbol: tensor in gptlib's layout} and the extras."""

    weights: dict[str, torch.Tensor]
    extra: list[str] = field(default_factory=list)


def parameters(module: nn.Module) -> list[tuple[str, nn.Parameter]]:
    return list(module.named_parameters())


def _split(params):
    matrices = [(n, p) for n, p in params if p.dim() >= 2]
    vectors = [(n, p) for n, p in params if p.dim() == 1]
    return matrices, vectors


def layer_norm_readings(module: nn.Module, d: int) -> list[Reading]:
    """gamma and beta, each (d,): by name (gamma/weight, beta/bias), else both orders."""
    params = parameters(module)
    if any(p.shape != (d,) for _, p in params) or len(params) != 2:
        shapes = [f"{n} {tuple(p.shape)}" for n, p in params] or ["none"]
        raise Wrong(f"a LayerNorm of width d = {d} has two parameters of shape ({d},), the gain gamma and the shift "
                    f"beta of Definition 4.1; yours has: {', '.join(shapes)}.", mistake="build-layernorm-parameters")
    names = [n for n, _ in params]
    table = dict(params)
    orders = ordered(names, ["gain", "shift"], lambda n, role: says(own_name(n), role))
    return [Reading({"gamma": table[g], "beta": table[b]}) for g, b in orders]


def head_readings(module: nn.Module, d: int, d_head: int) -> list[Reading]:
    """One head: W_Q, W_K, W_V each (d, d_head) acting as X @ W; vectors are extra (the head has no bias)."""
    matrices, vectors = _split(parameters(module))
    triples = _qkv_triples(matrices, d, 1, d_head) if len(matrices) in (1, 3) else []
    if not triples:
        raise Wrong(f"one head has three matrices W_Q, W_K, W_V of shape ({d}, {d_head}) (or nn.Linear's "
                    f"({d_head}, {d})), or one holding all three: ({d}, {3 * d_head}), ({3 * d_head}, {d}) or "
                    f"(3, {d_head}, {d}); yours has: {', '.join(f'{n} {tuple(p.shape)}' for n, p in matrices) or 'none'}.",
                    mistake="build-head-matrices")
    return [Reading({"W_Q": W_Q[0], "W_K": W_K[0], "W_V": W_V[0]}, [n for n, _ in vectors]) for W_Q, W_K, W_V in triples]


def _per_head(W: torch.Tensor, H: int) -> torch.Tensor:
    """(d, H d_head) acting as X @ W, heads side by side -> (H, d, d_head)."""
    d, width = W.shape
    return W.reshape(d, H, width // H).permute(1, 0, 2)


def _as_heads(t: torch.Tensor, d: int, H: int, d_head: int) -> list[torch.Tensor]:
    """One role's tensor read as (H, d, d_head), each head acting as X @ W: a (d, H d_head) matrix either way
    round (heads side by side), or a per-head (H, d, d_head) or (H, d_head, d) tensor. Empty if none fits."""
    if t.dim() == 2:
        return [_per_head(W, H) for W in orientations(t, d, H * d_head)]
    if t.dim() == 3 and t.shape[0] == H:
        return [W for W, fits in ((t, tuple(t.shape[1:]) == (d, d_head)),
                                  (t.transpose(1, 2), tuple(t.shape[1:]) == (d_head, d))) if fits]
    return []


def _qkv_triples(matrices, d: int, H: int, d_head: int) -> list[tuple[torch.Tensor, ...]]:
    """Every reading (W_Q, W_K, W_V), each (H, d, d_head), of the tensors that hold them: three tensors (roles
    by name, else every order), one holding all three, or the same per head (H groups in order, one module per
    head). One tensor holds all three fused along its 3 H d_head side ((d, 3 H d_head) or nn.Linear's
    transpose) or stacked along a first axis of 3 ((3, d_head, d), (3, H, d_head, d), ...), and is read as
    Q, K, V in that order, the order nanoGPT, GPT-2 and torch's in_proj_weight use: its parts have no names
    to say otherwise. Where shapes allow several layouts (three (d, d) tensors for H = 3), all are candidates."""
    names = [n for n, _ in matrices]
    table = dict(matrices)
    readings = []
    if len(matrices) == 1:
        t = table[names[0]]
        if t.dim() >= 3 and t.shape[0] == 3:  # stacked: the three parts have one shape, so their readings pair up
            readings += zip(*(_as_heads(part, d, H, d_head) for part in t.unbind(0)))
        else:
            readings += [tuple(_per_head(W, H) for W in W.split(H * d_head, dim=1)) for W in orientations(t, d, 3 * H * d_head)]
    if len(matrices) == 3:
        readings += [triple for order in ordered(names, ["Q", "K", "V"])
                     for triple in itertools.product(*(_as_heads(table[n], d, H, d_head) for n in order))]
    per_head = len(matrices) // H
    if H > 1 and per_head in (1, 3) and len(matrices) == per_head * H:  # one module per head, in order
        heads = [_qkv_triples(matrices[per_head * h : per_head * (h + 1)], d, 1, d_head) for h in range(H)]
        if all(len(found) == len(heads[0]) for found in heads):  # alike heads: their readings pair up
            readings += [tuple(torch.cat([triple[r] for triple in triples]) for r in range(3)) for triples in zip(*heads)]
    return readings


def attention_readings(module: nn.Module, d: int, H: int) -> list[Reading]:
    """W_Q, W_K, W_V (H, d, d_head), W_O (d, d) acting on [C^1 | ... | C^H], b_O (d,).

    W_O is the (d, d) matrix whose name says so (out, proj, W_O, ...), else the last (d, d) one
    registered; b_O likewise among the (d,) vectors. Every other vector is extra."""
    matrices, vectors = _split(parameters(module))
    square = [n for n, p in matrices if tuple(p.shape) == (d, d)]
    if not square:
        raise Wrong(f"multi-head attention has an output matrix W_O of shape ({d}, {d}); yours has none "
                    f"(matrices: {', '.join(f'{n} {tuple(p.shape)}' for n, p in matrices) or 'none'}).",
                    mistake="build-attention-no-w-o")
    named_O = [n for n in square if says(n, "O")]
    o_name = named_O[-1] if named_O else square[-1]
    table = dict(matrices)
    rest = [(n, p) for n, p in matrices if n != o_name]
    bias_names = [n for n, p in vectors if tuple(p.shape) == (d,)]
    named_b = [n for n in bias_names if says(n, "O")]
    if not bias_names:
        raise Wrong(f"the course's attention adds an output bias b_O of shape ({d},) after W_O (Theorem 5.2 counts it); "
                    f"yours has no ({d},) vector.", mistake="build-attention-no-b-o")
    b_name = named_b[-1] if named_b else bias_names[-1]
    extra = [n for n, _ in vectors if n != b_name]
    readings = []
    for W_Q, W_K, W_V in _qkv_triples(rest, d, H, d // H):
        for W_O in orientations(table[o_name], d, d):
            b_O = dict(vectors)[b_name]
            readings.append(Reading({"W_Q": W_Q, "W_K": W_K, "W_V": W_V, "W_O": W_O, "b_O": b_O}, extra))
    if not readings:
        shapes = ", ".join(f"{n} {tuple(p.shape)}" for n, p in rest)
        raise Wrong(f"cannot tell your W_Q, W_K, W_V apart for d = {d}, H = {H}: expected one fused ({3 * d}, {d}) "
                    f"matrix or one stacked (3, {d}, {d}) or (3, {H}, {d // H}, {d}) tensor, three ({d}, {d}) or "
                    f"({H}, {d}, {d // H}) ones, or three ({d}, {d // H}) per head "
                    f"(name them q/k/v or query/key/value); yours: {shapes or 'none'}.", mistake="build-attention-qkv-unreadable")
    return readings


def mlp_readings(module: nn.Module, d: int, d_ff: int) -> list[Reading]:
    """W_1 (d_ff, d), b_1 (d_ff,), W_2 (d, d_ff), b_2 (d,) in gptlib's layout (W_1 acts as F.linear)."""
    matrices, vectors = _split(parameters(module))
    if len(matrices) != 2 or not all(orientations(p, d, d_ff) or orientations(p, d_ff, d) for _, p in matrices):
        raise Wrong(f"the MLP has two matrices, W_1 ({d} -> {d_ff}) and W_2 ({d_ff} -> {d}); yours has: "
                    f"{', '.join(f'{n} {tuple(p.shape)}' for n, p in matrices) or 'none'}.", mistake="build-mlp-matrices")
    table = dict(matrices)
    by_name = {n: p for n, p in vectors}
    firsts = [n for n, p in vectors if tuple(p.shape) == (d_ff,) and (d != d_ff or not says(n, "2"))]
    seconds = [n for n, p in vectors if tuple(p.shape) == (d,) and n not in firsts[:1]]
    if not firsts or not seconds or len(vectors) != 2:
        raise Wrong(f"Definition 2.1 has two biases, b_1 of shape ({d_ff},) and b_2 of shape ({d},); yours: "
                    f"{', '.join(f'{n} {tuple(p.shape)}' for n, p in vectors) or 'none'}.", mistake="build-mlp-biases")
    b_1, b_2 = by_name[firsts[0]], by_name[seconds[0]]
    readings = []
    for first, second in ordered([n for n, _ in matrices], ["1", "2"]):
        for W_1 in orientations(table[first], d, d_ff):
            for W_2 in orientations(table[second], d_ff, d):
                readings.append(Reading({"W_1": W_1.T, "b_1": b_1, "W_2": W_2.T, "b_2": b_2}))
    return readings
