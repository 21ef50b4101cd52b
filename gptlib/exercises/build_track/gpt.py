"""Build step 6, Section 5: the GPT, ids (B, T) -> logits Z = LN_f(X^(L)) W_U."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ...checking import roles
from ...checking.components import B, T, agreeing_reading, built, extra_note, loaded, output, random_weights, sizes, zero_extra
from ...checking.mistakes import Mistake
from ...checking.running import Wrong, checker
from ...checking.variants import variant_seed
from ...config import GPTConfig
from ...model import GPT as ReferenceGPT
from ...model import attention_matrices_formed
from .attention import heads_of
from .block import block_parts, is_layer_norm, load_block, named_parts, read_block
from .layernorm import read_layer_norm


def gpt_parts(module: nn.Module, V: int, T_max: int, d: int, L: int) -> dict:
    """The GPT's pieces: E (V, d), P (T_max, d) and W_U (d, V), each as the list of its readings (stored
    either way round: both when square), W_U None when tied to E; the L blocks (modules), LN_f (a module),
    and extra tensors (a bias on W_U). Roles by shape, then name, then order."""
    children = named_parts(module, L)
    blocks = next((child for _, child in children if isinstance(child, (nn.ModuleList, nn.Sequential)) and len(child) == L
                   or isinstance(child, nn.ModuleDict)), None)  # named_parts keeps a container only if it holds the blocks
    if blocks is None:
        raise Wrong(f"expected your GPT to hold its {L} blocks in an nn.ModuleList (or nn.Sequential or nn.ModuleDict) "
                    f"of length L = {L}.", mistake="build-gpt-blocks-not-a-list")
    norms = [(n, c) for n, c in children if c is not blocks and is_layer_norm(c, d)]
    if len(norms) != 1:
        raise Wrong(f"expected one final LayerNorm LN_f (a submodule with gamma and beta of shape ({d},)) beside the "
                    f"blocks; found {len(norms)}.", mistake="build-gpt-final-layernorm-missing")
    inside = {id(p) for c in (blocks, norms[0][1]) for p in c.parameters()}
    own = [(n, p) for n, p in module.named_parameters() if id(p) not in inside]
    vocab = [(n, p) for n, p in own if roles.orientations(p, V, d)]
    positions = [(n, p) for n, p in own if roles.orientations(p, T_max, d)]
    extra = [n for n, p in own if (n, p) not in vocab and (n, p) not in positions]
    if not positions:
        raise Wrong(f"your GPT has no positional embedding P of shape ({T_max}, {d}) (T_max x d, or d x T_max): Section 5 adds "
                    "P[t] to E[x_t], without it attention cannot tell positions apart.",
                    mistake="build-gpt-no-positional-embedding")
    if not 1 <= len(vocab) <= 2 or any(p.dim() != 1 for n, p in own if n in extra):
        shapes = ", ".join(f"{n} {tuple(p.shape)}" for n, p in own)
        raise Wrong(f"expected E ({V}, {d}), P ({T_max}, {d}) and W_U ({d}, {V}) (or nn.Linear's ({V}, {d})) outside "
                    f"the blocks; yours: {shapes}.", mistake="build-gpt-embeddings-missing")
    if len(vocab) == 1:  # tied: W_U = E^T (Aside 5.3)
        E_name, U_name = vocab[0][0], None
    else:
        embeddings = {f"{n}.weight" for n, m in module.named_modules() if isinstance(m, nn.Embedding)}
        named = [n for n, _ in vocab if roles.says(n, "U")] or [n for n, _ in vocab if n not in embeddings]
        U_name = named[-1] if named else vocab[-1][0]  # by name, else the one that is no nn.Embedding's table
        E_name = next(n for n, _ in vocab if n != U_name)
    table = dict(own)
    W_U = None if U_name is None else roles.orientations(table[U_name], d, V)
    blocks = list(blocks.values() if isinstance(blocks, nn.ModuleDict) else blocks)
    return {"E": roles.orientations(table[E_name], V, d), "P": roles.orientations(positions[0][1], T_max, d), "W_U": W_U,
            "blocks": blocks, "ln_f": norms[0], "extra": extra}


def read_gpt(module: nn.Module, V: int, T_max: int, d: int, H: int | None, L: int, d_ff: int, seed: int = 0):
    """gpt_parts(module) with "reference": gptlib's GPT (float64) loaded with the reading under which `module`
    computes Section 5's logits; Wrong naming the mistake otherwise."""
    parts = gpt_parts(module, V, T_max, d, L)
    zero_extra(module, parts["extra"])
    blocks = [read_block(block, d, H, d_ff, seed=seed + l, where=f"block {l}") for l, block in enumerate(parts["blocks"])]
    ln_name, ln_f = parts["ln_f"]
    try:
        ln_f_reading = read_layer_norm(ln_f, d)
    except Wrong as wrong:
        raise Wrong(f"your final LayerNorm {ln_name} fails on its own: {wrong.message}", mistake=wrong.mistake) from None
    H = heads_of(block_parts(parts["blocks"][0], d, d_ff)["attn"][0][1], H)
    config = GPTConfig(V=V, T_max=T_max, d=d, H=H, L=L, d_ff=d_ff, tie_weights=parts["W_U"] is None)
    reference = ReferenceGPT(config).double()
    loaded(reference.ln_f, ln_f_reading.weights)
    tables = [{"E": E, "P": P} | ({} if W_U is None else {"W_U": W_U})
              for E in parts["E"] for P in parts["P"] for W_U in (parts["W_U"] or [None])]  # one unless a shape is square
    idx = torch.randint(0, V, (B, min(T, T_max)), generator=torch.Generator().manual_seed(variant_seed(seed)))
    got = output(module, idx, (*idx.shape, V), "idx")
    options = [[block, {**block, "ln_1": block["ln_2"], "ln_2": block["ln_1"]}] for block in blocks]

    def with_blocks(choice):
        table, block_options = choice
        loaded(reference, table)
        for block, option in zip(reference.blocks, block_options):
            load_block(block, option)
        return reference

    first = [found[0] for found in options]
    choices = ([(tables[0], first)] + [(tables[0], [found[1] if i == l else found[0] for i, found in enumerate(options)])
                                       for l in range(L)] + [(table, first) for table in tables[1:]])

    def logits(choice, X=None, final=True):
        model = with_blocks(choice)
        X = model.embed(idx) if X is None else X
        with attention_matrices_formed(model):  # every A^h formed, as a learner's attention forms them
            for block in model.blocks:
                X = block(X)
        return (model.ln_f(X) if final else X) @ model.unembedding

    def mistakes(choice):
        model = with_blocks(choice)
        E = F.embedding(idx, model.E)
        return {
            Mistake("gpt-no-p", "P is not added: X^(0)_t = E[x_t] + P[t]"): lambda: logits(choice, E),
            Mistake("gpt-no-final-ln",
                "the final LayerNorm LN_f is missing: Z = LN_f(X^(L)) W_U"): lambda: logits(choice, final=False),
            Mistake("gpt-p-last-rows", "P is read from its last rows: position t uses P[t], the first T rows"):
                lambda: logits(choice, E + model.P[-idx.shape[1]:]),
            Mistake("gpt-softmax-output",
                "your model returns probabilities (a softmax of the logits): Section 5's Z are the logits themselves"):
                lambda: logits(choice).softmax(-1),
        }

    inner = sorted({f"{name}" for found in blocks for reading in found.values() for name in reading.extra})
    parts["extra"] = parts["extra"] + [f"{name} (in every block)" for name in inner]
    reading = agreeing_reading(got, choices, lambda c: logits(c), mistakes, "GPT", extra_note(parts["extra"]))
    parts["reference"] = with_blocks(reading)
    return parts


@checker("Build step 6: the GPT")
def check_gpt(gpt, V: int | None = None, T_max: int | None = None, d: int | None = None, H: int | None = None,
              L: int | None = None, d_ff: int | None = None) -> tuple[str, list[str]]:
    """Section 5: `gpt` is your class (built as GPT(V, T_max, d, H, L, d_ff)) or a module (give its sizes);
    ids (B, T) -> logits (B, T, V). Each block and LN_f are checked alone, then the logits."""
    given = {"V": V, "T_max": T_max, "d": d, "H": H, "L": L, "d_ff": d_ff}
    if isinstance(gpt, nn.Module):
        missing = [k for k in ("V", "T_max", "d", "L") if given[k] is None]
        if missing:
            raise ValueError(f"give the sizes of a built model: {', '.join(m + '=...' for m in missing)}")
        given["d_ff"] = d_ff or 4 * d
    else:
        given = {k: v or sizes()[k] for k, v in given.items()}
    order = ("V", "T_max", "d", "H", "L", "d_ff")
    module = built(gpt, *(given[k] for k in order), what=", ".join(f"{k}={given[k]}" for k in order))
    with random_weights(module, seed=0):
        parts = read_gpt(module, **given)
    tied = " (W_U tied to E^T)" if parts["W_U"] is None else ""
    return (f"every block and LN_f pass alone, and the logits equal Section 5's Z = LN_f(X^(L)) W_U{tied} to within "
            "the float32 tolerance."), [", ".join(f"{k} = {v}" for k, v in given.items()), *extra_note(parts["extra"])]
