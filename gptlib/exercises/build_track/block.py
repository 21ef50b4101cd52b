"""Build step 5, Definition 3.1: the pre-norm block. Its parts are found by what their tensors' shapes say
(LayerNorms, the attention, the MLP), each is judged alone, then the whole."""

from __future__ import annotations

import torch
from torch import nn

from ...checking import roles
from ...checking.components import B, T, agreeing_reading, built, extra_note, inputs, loaded, output, random_weights, sizes
from ...checking.mistakes import Mistake
from ...checking.running import Wrong, checker
from ...config import GPTConfig
from ...model import Block as ReferenceBlock
from .attention import heads_of, read_attention
from .layernorm import read_layer_norm
from .mlp import read_mlp


def is_layer_norm(module: nn.Module, d: int) -> bool:
    shapes = [tuple(p.shape) for p in module.parameters()]
    return bool(shapes) and all(s == (d,) for s in shapes)


def holds_blocks(container: nn.Module, L: int) -> bool:
    """Whether a container is the L blocks: L entries with the same parameter shapes."""
    shapes = [[tuple(p.shape) for p in entry.parameters()] for entry in container.children()]
    return len(shapes) == L and all(s == shapes[0] for s in shapes) and len(shapes[0]) > 2


def named_parts(module: nn.Module, L: int | None = None) -> list[tuple[str, nn.Module]]:
    """The module's children, with an nn.ModuleDict's or nn.ModuleList's entries in its place (a container such
    as nanoGPT's `transformer = nn.ModuleDict(...)`, or a block's `norms = nn.ModuleList([LN_1, LN_2])`, is no
    part of its own), unless it holds the L blocks."""
    parts = []
    for name, child in module.named_children():
        if isinstance(child, (nn.ModuleDict, nn.ModuleList)) and not (L is not None and holds_blocks(child, L)):
            parts += [(f"{name}.{n}", c) for n, c in named_parts(child, L)]
        else:
            parts.append((name, child))
    return parts


def block_parts(module: nn.Module, d: int, d_ff: int) -> dict[str, list[tuple[str, nn.Module]]]:
    """The block's submodules sorted into 'ln' (LN_1 then LN_2), 'attn' and 'mlp'; Wrong if they do not fit."""
    if list(module.parameters(recurse=False)):
        raise Wrong("keep LN_1, the attention, LN_2 and the MLP as submodules of your block (attributes holding "
                    "modules), so that each can be checked on its own; yours holds parameters directly.",
                    mistake="build-block-parameters-not-submodules")
    parts = {"ln": [], "attn": [], "mlp": []}
    for name, child in named_parts(module):
        if not list(child.parameters()):
            continue  # GELU, Dropout, ...
        if is_layer_norm(child, d):
            parts["ln"].append((name, child))
        elif any(p.dim() >= 2 and d_ff in p.shape[-2:] for p in child.parameters()) and d_ff != d:
            parts["mlp"].append((name, child))
        else:
            parts["attn"].append((name, child))
    if [len(parts[k]) for k in ("ln", "attn", "mlp")] != [2, 1, 1]:
        found = ", ".join(f"{k}: {[n for n, _ in v]}" for k, v in parts.items())
        raise Wrong(f"a block has two LayerNorms, one attention and one MLP as submodules; found {found}.",
                    mistake="build-block-parts-missing")
    hinted = [n for n, _ in parts["ln"] if roles.says(n, "LN_2")]
    if hinted and hinted[0] == parts["ln"][0][0]:
        parts["ln"].reverse()
    return parts


def read_parts(parts: dict, d: int, H: int, d_ff: int, where: str) -> dict[str, roles.Reading]:
    """Each submodule judged on its own (so a mistake is named where it is); {symbol group: reading}."""
    (ln1_name, ln1), (ln2_name, ln2) = parts["ln"]
    (attn_name, attn), (mlp_name, mlp) = parts["attn"][0], parts["mlp"][0]
    checks = {
        "ln_1": lambda: read_layer_norm(ln1, d, where=f"{where} {ln1_name}"),
        "ln_2": lambda: read_layer_norm(ln2, d, where=f"{where} {ln2_name}"),
        "attn": lambda: read_attention(attn, d, heads_of(attn, H), where=f"{where} {attn_name}"),
        "mlp": lambda: read_mlp(mlp, d, d_ff, where=f"{where} {mlp_name}"),
    }
    found = {}
    for key, read_part in checks.items():
        try:
            found[key] = read_part()
        except Wrong as wrong:
            name = {"ln_1": ln1_name, "ln_2": ln2_name, "attn": attn_name, "mlp": mlp_name}[key]
            raise Wrong(f"{where}'s {name} fails on its own: {wrong.message}", wrong.details, mistake=wrong.mistake) from None
    return found


def load_block(block: ReferenceBlock, found: dict[str, roles.Reading]) -> None:
    for key, reading in found.items():
        loaded(getattr(block, key), reading.weights)


def block_mistakes(block: ReferenceBlock, X: torch.Tensor) -> dict:
    ln_1, attn, ln_2, mlp = block.ln_1, block.attn, block.ln_2, block.mlp

    def post_norm():
        Y = ln_1(X + attn(X))
        return ln_2(Y + mlp(Y))

    def normalized_residual():
        Y = ln_1(X) + attn(ln_1(X))
        return ln_2(Y) + mlp(ln_2(Y))

    return {
        Mistake("block-post-norm",
            "this is the post-norm block (Aside 3.5): LayerNorm after each residual addition; Definition 3.1 normalizes "
        "the branch's input, X + MHA(LN_1(X))"): post_norm,
        Mistake("block-mlp-reads-input",
            "the MLP reads LN_2(X), the block's input: it must read LN_2(Y), after the attention's write is added"):
            lambda: X + attn(ln_1(X)) + mlp(ln_2(X)),
        Mistake("block-no-residual", "the residual connections are missing: Y = X + MHA(LN_1(X)), X' = Y + MLP(LN_2(Y))"):
            lambda: mlp(ln_2(attn(ln_1(X)))),
        Mistake("block-residual-normalized",
            "the residual adds the normalized input: the stream carries X itself, Y = X + MHA(LN_1(X))"): normalized_residual,
        Mistake("block-no-mlp-residual",
            "the MLP's residual connection is missing: X' = Y + MLP(LN_2(Y))"): lambda: mlp(ln_2(X + attn(ln_1(X)))),
        Mistake("block-one-layernorm", "one LayerNorm serves both branches: LN_1 and LN_2 have their own gamma and beta"):
            lambda: (lambda Y: Y + mlp(ln_1(Y)))(X + attn(ln_1(X))),
    }


def read_block(module: nn.Module, d: int, H: int | None, d_ff: int, seed: int = 0, where: str = "your block"):
    """{symbol group: reading} under which the block is Definition 3.1; Wrong naming the mistake otherwise."""
    parts = block_parts(module, d, d_ff)
    found = read_parts(parts, d, H, d_ff, where)
    H = heads_of(parts["attn"][0][1], H)
    X = 2 * inputs(B, T, d, seed=seed + 5)
    got = output(module, X, (B, T, d), "X")
    block = ReferenceBlock(GPTConfig(d=d, H=H, d_ff=d_ff, T_max=max(T, 8))).double()
    block.attn.forms_A = True  # every A^h formed, as a learner's attention forms them
    load_block(block, found)
    X = X.double()
    options = [found, {**found, "ln_1": found["ln_2"], "ln_2": found["ln_1"]}]  # which LayerNorm is LN_1: by behaviour

    def reference(option):
        load_block(block, option)
        return block(X)

    def mistakes(option):
        load_block(block, option)
        return block_mistakes(block, X)

    return agreeing_reading(got, options, reference, mistakes, where)


@checker("Build step 5: the pre-norm block")
def check_block(block, d: int | None = None, H: int | None = None, d_ff: int | None = None) -> tuple[str, list[str]]:
    """Definition 3.1: `block` is your class (built as Block(d, H, d_ff)) or a module whose submodules are
    LN_1, the attention, LN_2 and the MLP. Each part is checked alone, then the whole."""
    if isinstance(block, nn.Module):
        vectors = sorted({p.shape[0] for p in block.parameters() if p.dim() == 1})
        d, d_ff = d or vectors[0], d_ff or vectors[-1]
    else:
        chosen = sizes()
        d, H, d_ff = d or chosen["d"], H or chosen["H"], d_ff or chosen["d_ff"]
    module = built(block, d, H, d_ff, what=f"d={d}, H={H}, d_ff={d_ff}")
    with random_weights(module, seed=0):
        found = read_block(module, d, H, d_ff)
    notes = extra_note([name for reading in found.values() for name in reading.extra])
    return ("each part passes alone, and the whole equals Y = X + MHA(LN_1(X)), X' = Y + MLP(LN_2(Y)) "
            "to within the float32 tolerance."), [f"d = {d}, d_ff = {d_ff}, input {(B, T, d)}", *notes]
