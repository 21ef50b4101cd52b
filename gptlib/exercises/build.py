"""The build track (notebook 09): one checker per piece of the GPT a learner writes, in the lecture's order.

    check_layer_norm_module(LayerNorm)         Definition 4.1                  built as LayerNorm(d)
    check_attention_head(AttentionHead)        one head of Definition 1.1      AttentionHead(d, d_head)
    check_multi_head_attention(MHA)            Definition 1.1 with W_O, b_O    MultiHeadAttention(d, H)
    check_mlp(MLP)                             Definition 2.1, exact GELU      MLP(d, d_ff)
    check_block(Block)                         Definition 3.1, pre-norm        Block(d, H, d_ff)
    check_gpt(GPT)                             Section 5                       GPT(V, T_max, d, H, L, d_ff)
    check_init(init_weights, GPT)              Project aside 5.2               init_weights(GPT(...))

Each takes the learner's class (built with the small sizes of SIZES, so that every shape says its
role) or a module already built (any sizes; attention's H is then read from the module or given).
The module is judged by what it computes, never by its names: its tensors are filled with seeded
random values, read as the lecture's symbols (gptlib.exercises.roles: by shape, by name where a name
says, otherwise every reading the shapes allow), loaded into gptlib's own component, and both are
run on the same random input. The learner's weights are put back afterwards. A reading under which
the two agree to TOL passes; otherwise the typical mistakes of that component are computed under
each reading in turn, and those that explain the learner's output are named (result.name_mistake: all
of them, as candidates, when several do).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import math

import torch
import torch.nn.functional as F
from torch import nn

from .. import positionwise
from ..config import GPTConfig
from ..model import GPT as ReferenceGPT
from ..model import MLP as ReferenceMLP
from ..model import Block as ReferenceBlock
from ..model import MultiHeadAttention as ReferenceAttention
from . import roles
from .result import Wrong, call, checker, close, name_mistake

SIZES = {"V": 13, "T_max": 8, "d": 16, "H": 2, "L": 2, "d_ff": 64}  # all different, so shapes tell roles apart
B, T = 2, 6  # the random input: T < T_max, so P's first T rows are the ones used
EPS = 1e-5  # Definition 4.1's epsilon, as in the course config
TOL = 2e-5  # |learner - reference| <= TOL * (1 + max |reference|): float32 rounding, well below every mistake
same = functools.partial(close, rtol=TOL, atol=TOL, of_largest=True)  # that rule, as result.close states it


def built(learner, *sizes: int, what: str) -> nn.Module:
    """The learner's module: as given, or their class called with the sizes (positionally)."""
    module = learner if isinstance(learner, nn.Module) else call(learner, *sizes, what=what)
    if not isinstance(module, nn.Module):
        raise Wrong(f"expected an nn.Module (or a class building one), got {type(module).__name__}")
    return module


@contextlib.contextmanager
def random_weights(module: nn.Module, seed: int):
    """Fill every parameter with seeded random values (matrices ~ 1/sqrt(their smaller side)), no_grad;
    the module's own weights and mode come back afterwards."""
    saved, training = copy.deepcopy(module.state_dict()), module.training
    generator = torch.Generator().manual_seed(seed)
    module.eval()
    try:
        with torch.no_grad():
            for p in module.parameters():
                std = 1 / math.sqrt(min(p.shape[-2:])) if p.dim() >= 2 else 0.5
                p.copy_(torch.randn(p.shape, generator=generator) * std)
            yield
    finally:
        module.load_state_dict(saved)
        module.train(training)


def zero_extra(module: nn.Module, names: list[str]) -> list[str]:
    """Zero the learner's tensors the lecture has no place for (biases on W_Q, W_K, W_V, W_U); the note saying so."""
    table = dict(module.named_parameters())
    for name in names:
        table[name].zero_()
    return extra_note(names)


def extra_note(names: list[str]) -> list[str]:
    return [f"{', '.join(names)}: no such term in the lecture's definition, set to 0 for this comparison"] if names else []


def output(module: nn.Module, x: torch.Tensor, shape: tuple[int, ...], what: str) -> torch.Tensor:
    """module(x), checked to be a tensor of `shape`, as float64 (NaN kept: a mistake may show as NaN)."""
    y = call(module, x, what=what)
    if isinstance(y, (tuple, list)) and y and isinstance(y[0], torch.Tensor):
        y = y[0]
    if not isinstance(y, torch.Tensor):
        raise Wrong(f"your module returned {type(y).__name__}, expected a tensor of shape {shape}")
    if tuple(y.shape) != tuple(shape):
        raise Wrong(f"for an input of shape {tuple(x.shape)} your module returned shape {tuple(y.shape)}, expected {shape}")
    return y.detach().double()


HIDDEN_DIAGONAL = "your mask also hides the diagonal (s >= t): position t must see itself, so mask only s > t (triu(diagonal=1))"


def refuse_nan_at_start(got: torch.Tensor) -> None:
    """Output (B, T, ...) that is NaN at t = 0 only: softmax over a row that is all -inf, the diagonal hidden."""
    bad = ~torch.isfinite(got).reshape(*got.shape[:2], -1).all(-1)  # (B, T)
    if bad[:, 0].all() and not bad[:, 1:].any():
        raise Wrong(HIDDEN_DIAGONAL + ": at t = 0 nothing is left to attend to, and a softmax of all -inf is NaN.")


def judge(got: torch.Tensor, readings: list, reference, mistakes, component: str, notes: list[str] = ()):
    """The first reading under which `got` equals reference(reading); else Wrong naming the typical
    mistakes (mistakes(reading) -> {message: thunk}) that reproduce `got` (result.name_mistake: every one
    that does, as candidates when several do), under the first reading under which any does."""
    for reading in readings:
        if same(got, reference(reading)):
            return reading
    for reading in readings:
        named = name_mistake({(): got}, mistakes(reading), same)  # the point (): each thunk takes no arguments
        if named:
            raise Wrong(named + ".", list(notes))
    gap = (got - reference(readings[0])).abs().max().item()
    nan = " (it holds NaN or inf)" if not torch.isfinite(got).all() else ""
    raise Wrong(f"your {component} differs from the lecture's by up to {gap:.2g}{nan}, more than the tolerance "
                f"{TOL:g} x (1 + max |output|), and no typical mistake explains it.", list(notes))


def inputs(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


# ---- Definition 4.1: LayerNorm ---------------------------------------------------------------


def layer_norm_mistakes(X: torch.Tensor, gamma, beta) -> dict:
    mu = X.mean(-1, keepdim=True)
    var = X.var(-1, unbiased=False, keepdim=True)

    def affine(Y):
        return gamma * Y + beta

    return {
        "you used the unbiased variance (dividing by d - 1, torch.var's default): sigma^2 in Definition 4.1 divides by d":
            lambda: affine((X - mu) / torch.sqrt(X.var(-1, keepdim=True) + EPS)),
        "you normalized over the wrong axis (positions, dim -2): LayerNorm normalizes each row over its d features":
            lambda: affine((X - X.mean(-2, keepdim=True)) / torch.sqrt(X.var(-2, unbiased=False, keepdim=True) + EPS)),
        "you normalized over the batch (dim 0, as BatchNorm does): LayerNorm normalizes each row over its d features":
            lambda: affine((X - X.mean(0, keepdim=True)) / torch.sqrt(X.var(0, unbiased=False, keepdim=True) + EPS)),
        "your eps sits outside the square root: Definition 4.1 divides by sqrt(sigma^2 + eps)":
            lambda: affine((X - mu) / (var.sqrt() + EPS)),
        "you divided by std + eps with the unbiased std (x.std()): sigma^2 divides by d, and eps goes inside the root":
            lambda: affine((X - mu) / (X.std(-1, keepdim=True) + EPS)),
        "your eps is missing: Definition 4.1 divides by sqrt(sigma^2 + eps), with eps = 1e-5":
            lambda: affine((X - mu) / var.sqrt()),
        "you do not subtract the mean (that is RMSNorm, Aside 4.4): Definition 4.1 centres first":
            lambda: affine(X / torch.sqrt(X.pow(2).mean(-1, keepdim=True) + EPS)),
        "gamma and beta are not applied: the output is gamma * normalized + beta":
            lambda: (X - mu) / torch.sqrt(var + EPS),
        "you divided by the variance instead of its square root": lambda: affine((X - mu) / (var + EPS)),
    }


def layer_norm_input(d: int, seed: int) -> torch.Tensor:
    """(B, T, d) rows of varied mean and scale; row (0, 0) has sigma ~ 1e-3, where eps matters."""
    X = 2 * inputs(B, T, d, seed=seed) + 1
    X[0, 0] = 1e-3 * inputs(d, seed=seed + 1)
    return X


def judge_layer_norm(module: nn.Module, d: int, seed: int = 0, where: str = "LayerNorm") -> roles.Reading:
    """The reading under which `module` is Definition 4.1 (Wrong naming its mistake otherwise); weights random."""
    readings = roles.layer_norm_readings(module, d)
    X = layer_norm_input(d, seed)
    got = output(module, X, X.shape, "X")
    X = X.double()
    return judge(got, readings, lambda r: F.layer_norm(X, (d,), r.weights["gamma"].double(), r.weights["beta"].double(), EPS),
                 lambda r: layer_norm_mistakes(X, r.weights["gamma"].double(), r.weights["beta"].double()), where)


@checker("Build step 1: LayerNorm")
def check_layer_norm_module(layer_norm, d: int | None = None) -> tuple[str, list[str]]:
    """Definition 4.1 as a module: `layer_norm` is your class (built as LayerNorm(d)) or a module of width d."""
    if isinstance(layer_norm, nn.Module):
        d = d or next((p.shape[-1] for p in layer_norm.parameters()), SIZES["d"])
    d = d or SIZES["d"]
    module = built(layer_norm, d, what=f"d={d}")
    with random_weights(module, seed=0):
        judge_layer_norm(module, d)
    return (f"equals F.layer_norm (eps = {EPS:g}) with your gamma and beta set to random values, "
            f"on rows of every scale, to within the float32 tolerance."), [f"d = {d}, input {(B, T, d)}"]


# ---- Definition 1.1: attention ---------------------------------------------------------------

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
        "your mask is off by one: position t also sees t + 1; hide every s > t (triu(diagonal=1))": variant(mask="ahead"),
        "there is no causal mask: position t sees the future; set the scores of s > t to -inf before the softmax":
            variant(mask="none"),
        "you masked after the softmax: zeroing A's future entries leaves rows that do not sum to 1; "
        "set the scores to -inf before the softmax": variant(mask="after"),
        "the scores are divided by sqrt(d), the model width: Definition 1.1 divides by sqrt(d_head)": variant(scale="d"),
        "the 1/sqrt(d_head) scaling of the scores is missing": variant(scale="none"),
        "the scores are divided by d_head instead of sqrt(d_head)": variant(scale="d_head_not_sqrt"),
        "your softmax runs over the wrong axis (the queries t, dim -2): each row t of A must sum to 1 over s":
            variant(softmax_dim=-2),
    }


def attention_run(module: nn.Module, readings: list, d: int, width: int, seed: int):
    """(notes on zeroed extras, the learner's output (B, T, width) in float64, the input X (B, T, d) in float64)."""
    notes = zero_extra(module, readings[0].extra)
    X = inputs(B, T, d, seed=seed)
    got = output(module, X, (B, T, width), "X")
    refuse_nan_at_start(got)
    return notes, got, X.double()


def judge_head(module: nn.Module, d: int, d_head: int, seed: int = 0) -> roles.Reading:
    readings = roles.head_readings(module, d, d_head)
    notes, got, X = attention_run(module, readings, d, d_head, seed)

    def per_head(r):
        return [r.weights[k].double()[None] for k in ("W_Q", "W_K", "W_V")]  # each (1, d, d_head)

    def reference(r):
        q, k, v = (X @ W[0] for W in per_head(r))
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    return judge(got, readings, reference, lambda r: head_mistakes(X, *per_head(r), lambda C: C[:, 0]), "head", notes)


@checker("Build step 2: one attention head")
def check_attention_head(head, d: int | None = None, d_head: int | None = None) -> tuple[str, list[str]]:
    """One causal head: `head` is your class (built as AttentionHead(d, d_head)) or a module; X (B, T, d) -> (B, T, d_head)."""
    d, d_head = d or SIZES["d"], d_head or SIZES["d"] // SIZES["H"]
    module = built(head, d, d_head, what=f"d={d}, d_head={d_head}")
    with random_weights(module, seed=0):
        notes = extra_note(judge_head(module, d, d_head).extra)
    return ("equals softmax(Q K^T / sqrt(d_head) + M) V with the causal mask M, your W_Q, W_K, W_V set to random "
            "values, to within the float32 tolerance."), [f"d = {d}, d_head = {d_head}, input {(B, T, d)}", *notes]


def concatenated(C: torch.Tensor, how: str = "heads") -> torch.Tensor:
    """(B, H, T, d_head) -> (B, T, d): [C^1 | ... | C^H] ('heads'), or two wrong ways of joining them."""
    Bc, H, Tc, d_head = C.shape
    if how == "interleaved":  # feature j of head h at column j * H + h
        return C.permute(0, 2, 3, 1).reshape(Bc, Tc, H * d_head)
    if how == "no_transpose":  # (B, H, T, d_head) reshaped as if it were (B, T, H, d_head): positions mixed
        return C.reshape(Bc, Tc, H * d_head)
    return C.transpose(1, 2).reshape(Bc, Tc, H * d_head)


def loaded(module: nn.Module, weights: dict) -> nn.Module:
    """A gptlib component with the weights of a reading copied in (its parameters by their lecture names)."""
    with torch.no_grad():
        for name, value in weights.items():
            getattr(module, name).copy_(value)
    return module


def judge_attention(module: nn.Module, d: int, H: int, seed: int = 0, where: str = "attention") -> roles.Reading:
    readings = roles.attention_readings(module, d, H)
    notes, got, X = attention_run(module, readings, d, d, seed)

    def reference(r):
        return loaded(ReferenceAttention(GPTConfig(d=d, H=H, T_max=max(T, 8))).double(), r.weights)(X, explicit=True)

    def mistakes(r):
        w = {k: v.double() for k, v in r.weights.items()}

        def joined(how="heads", bias=True):
            return lambda C: concatenated(C, how) @ w["W_O"] + (w["b_O"] if bias else 0)

        found = head_mistakes(X, w["W_Q"], w["W_K"], w["W_V"], joined())
        right = heads(X, w["W_Q"], w["W_K"], w["W_V"])
        found.update({
            "your heads are joined in the wrong order: Definition 1.1 concatenates [C^1 | ... | C^H], head by head, "
            "before W_O (yours interleaves their features)": lambda: joined("interleaved")(right),
            "you reshaped (B, H, T, d_head) to (B, T, d) without moving the head axis back next to d_head first: "
            "that mixes positions (transpose(1, 2) before the reshape)": lambda: joined("no_transpose")(right),
            "the output bias b_O is not added (Theorem 5.2's convention: a bias on the output projection)":
                lambda: joined(bias=False)(right),
        })
        return found

    return judge(got, readings, reference, mistakes, where, notes)


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
    raise Wrong("cannot tell how many heads your module has: pass H=... to the checker")


@checker("Build step 3: multi-head attention")
def check_multi_head_attention(attention, d: int | None = None, H: int | None = None) -> tuple[str, list[str]]:
    """Definition 1.1: `attention` is your class (built as MultiHeadAttention(d, H)) or a module; X (B, T, d) -> (B, T, d)."""
    if not isinstance(attention, nn.Module):
        d, H = d or SIZES["d"], H or SIZES["H"]
    module = built(attention, d, H, what=f"d={d}, H={H}")
    H = heads_of(module, H)
    d = d or next((p.shape[0] for p in module.parameters() if p.dim() == 2 and p.shape[0] == p.shape[1]), 0)
    with random_weights(module, seed=0):
        notes = extra_note(judge_attention(module, d, H).extra)
    return ("equals gptlib's MultiHeadAttention, [C^1 | ... | C^H] W_O + b_O with the causal mask, under your "
            "weights set to random values, to within the float32 tolerance."), [f"d = {d}, H = {H}, input {(B, T, d)}", *notes]


# ---- Definition 2.1: the MLP -----------------------------------------------------------------


def tanh_gap() -> float:
    """max over t of |exact GELU - tanh GELU|, on a fine grid in float64."""
    t = torch.linspace(-8, 8, 160001, dtype=torch.float64)
    return (positionwise.gelu_exact(t) - positionwise.gelu_tanh(t)).abs().max().item()


def judge_mlp(module: nn.Module, d: int, d_ff: int, seed: int = 0, where: str = "MLP") -> roles.Reading:
    readings = roles.mlp_readings(module, d, d_ff)
    X = 2 * inputs(B, T, d, seed=seed)  # pre-activations of order 1-3, where the tanh form differs most
    got = output(module, X, (B, T, d), "X")
    X = X.double()

    def reference(r):
        return loaded(ReferenceMLP(GPTConfig(d=d, H=1, d_ff=d_ff)).double(), r.weights)(X)

    def mistakes(r):
        w = {k: v.double() for k, v in r.weights.items()}

        def through(activation):
            return lambda: activation(F.linear(X, w["W_1"], w["b_1"])) @ w["W_2"].T + w["b_2"]

        return {
            f"you used the tanh approximation of GELU (GPT-2's): Definition 2.1 uses the exact t Phi(t); the two differ "
            f"by up to {tanh_gap():.1e} per unit, too much at float32 precision": through(positionwise.gelu_tanh),
            "you used ReLU: Definition 2.1's nonlinearity is GELU, t Phi(t)": through(torch.relu),
            "there is no nonlinearity between W_1 and W_2": through(lambda t: t),
            "you used the sigmoid-based approximation t sigmoid(1.702 t) (SiLU-like): Definition 2.1 uses t Phi(t)":
                through(lambda t: t * torch.sigmoid(1.702 * t)),
        }

    return judge(got, readings, reference, mistakes, where)


@checker("Build step 4: the MLP")
def check_mlp(mlp, d: int | None = None, d_ff: int | None = None) -> tuple[str, list[str]]:
    """Definition 2.1: `mlp` is your class (built as MLP(d, d_ff)) or a module; X (B, T, d) -> (B, T, d)."""
    if isinstance(mlp, nn.Module):
        vectors = sorted({p.shape[0] for p in mlp.parameters() if p.dim() == 1})
        d, d_ff = d or vectors[0], d_ff or vectors[-1]
    else:
        d, d_ff = d or SIZES["d"], d_ff or SIZES["d_ff"]
    module = built(mlp, d, d_ff, what=f"d={d}, d_ff={d_ff}")
    with random_weights(module, seed=0):
        judge_mlp(module, d, d_ff)
    return ("equals W_2 GELU(W_1 u + b_1) + b_2 with the exact GELU, your weights set to random values, to within "
            "the float32 tolerance."), [f"d = {d}, d_ff = {d_ff}, input {(B, T, d)}"]


# ---- Definition 3.1: the pre-norm block ------------------------------------------------------


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
                    "modules), so that each can be checked on its own; yours holds parameters directly.")
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
        raise Wrong(f"a block has two LayerNorms, one attention and one MLP as submodules; found {found}.")
    hinted = [n for n, _ in parts["ln"] if roles.says(n, "LN_2")]
    if hinted and hinted[0] == parts["ln"][0][0]:
        parts["ln"].reverse()
    return parts


def judge_parts(parts: dict, d: int, H: int, d_ff: int, where: str) -> dict[str, roles.Reading]:
    """Each submodule judged on its own (so a mistake is named where it is); {symbol group: reading}."""
    (ln1_name, ln1), (ln2_name, ln2) = parts["ln"]
    (attn_name, attn), (mlp_name, mlp) = parts["attn"][0], parts["mlp"][0]
    checks = {
        "ln_1": lambda: judge_layer_norm(ln1, d, where=f"{where} {ln1_name}"),
        "ln_2": lambda: judge_layer_norm(ln2, d, where=f"{where} {ln2_name}"),
        "attn": lambda: judge_attention(attn, d, heads_of(attn, H), where=f"{where} {attn_name}"),
        "mlp": lambda: judge_mlp(mlp, d, d_ff, where=f"{where} {mlp_name}"),
    }
    found = {}
    for key, judge_part in checks.items():
        try:
            found[key] = judge_part()
        except Wrong as wrong:
            name = {"ln_1": ln1_name, "ln_2": ln2_name, "attn": attn_name, "mlp": mlp_name}[key]
            raise Wrong(f"{where}'s {name} fails on its own: {wrong.message}", wrong.details) from None
    return found


def load_block(block: ReferenceBlock, found: dict[str, roles.Reading]) -> None:
    for key, reading in found.items():
        loaded(getattr(block, key), reading.weights)


def block_mistakes(block: ReferenceBlock, X: torch.Tensor) -> dict:
    ln_1, attn, ln_2, mlp = block.ln_1, lambda Z: block.attn(Z, explicit=True), block.ln_2, block.mlp

    def post_norm():
        Y = ln_1(X + attn(X))
        return ln_2(Y + mlp(Y))

    def normalized_residual():
        Y = ln_1(X) + attn(ln_1(X))
        return ln_2(Y) + mlp(ln_2(Y))

    return {
        "this is the post-norm block (Aside 3.5): LayerNorm after each residual addition; Definition 3.1 normalizes "
        "the branch's input, X + MHA(LN_1(X))": post_norm,
        "the MLP reads LN_2(X), the block's input: it must read LN_2(Y), after the attention's write is added":
            lambda: X + attn(ln_1(X)) + mlp(ln_2(X)),
        "the residual connections are missing: Y = X + MHA(LN_1(X)), X' = Y + MLP(LN_2(Y))":
            lambda: mlp(ln_2(attn(ln_1(X)))),
        "the residual adds the normalized input: the stream carries X itself, Y = X + MHA(LN_1(X))": normalized_residual,
        "the MLP's residual connection is missing: X' = Y + MLP(LN_2(Y))": lambda: mlp(ln_2(X + attn(ln_1(X)))),
        "one LayerNorm serves both branches: LN_1 and LN_2 have their own gamma and beta":
            lambda: (lambda Y: Y + mlp(ln_1(Y)))(X + attn(ln_1(X))),
    }


def judge_block(module: nn.Module, d: int, H: int | None, d_ff: int, seed: int = 0, where: str = "your block"):
    """{symbol group: reading} under which the block is Definition 3.1; Wrong naming the mistake otherwise."""
    parts = block_parts(module, d, d_ff)
    found = judge_parts(parts, d, H, d_ff, where)
    H = heads_of(parts["attn"][0][1], H)
    X = 2 * inputs(B, T, d, seed=seed + 5)
    got = output(module, X, (B, T, d), "X")
    block = ReferenceBlock(GPTConfig(d=d, H=H, d_ff=d_ff, T_max=max(T, 8))).double()
    load_block(block, found)
    X = X.double()
    options = [found, {**found, "ln_1": found["ln_2"], "ln_2": found["ln_1"]}]  # which LayerNorm is LN_1: by behaviour

    def reference(option):
        load_block(block, option)
        return block(X, explicit=True)

    def mistakes(option):
        load_block(block, option)
        return block_mistakes(block, X)

    return judge(got, options, reference, mistakes, where)


@checker("Build step 5: the pre-norm block")
def check_block(block, d: int | None = None, H: int | None = None, d_ff: int | None = None) -> tuple[str, list[str]]:
    """Definition 3.1: `block` is your class (built as Block(d, H, d_ff)) or a module whose submodules are
    LN_1, the attention, LN_2 and the MLP. Each part is checked alone, then the whole."""
    if isinstance(block, nn.Module):
        vectors = sorted({p.shape[0] for p in block.parameters() if p.dim() == 1})
        d, d_ff = d or vectors[0], d_ff or vectors[-1]
    else:
        d, H, d_ff = d or SIZES["d"], H or SIZES["H"], d_ff or SIZES["d_ff"]
    module = built(block, d, H, d_ff, what=f"d={d}, H={H}, d_ff={d_ff}")
    with random_weights(module, seed=0):
        found = judge_block(module, d, H, d_ff)
    notes = extra_note([name for reading in found.values() for name in reading.extra])
    return ("each part passes alone, and the whole equals Y = X + MHA(LN_1(X)), X' = Y + MLP(LN_2(Y)) "
            "to within the float32 tolerance."), [f"d = {d}, d_ff = {d_ff}, input {(B, T, d)}", *notes]


# ---- Section 5: the GPT ----------------------------------------------------------------------


def gpt_parts(module: nn.Module, V: int, T_max: int, d: int, L: int) -> dict:
    """The GPT's pieces: E (V, d), P (T_max, d) and W_U (d, V), each as the list of its readings (stored
    either way round: both when square), W_U None when tied to E; the L blocks (modules), LN_f (a module),
    and extra tensors (a bias on W_U). Roles by shape, then name, then order."""
    children = named_parts(module, L)
    blocks = next((child for _, child in children if isinstance(child, (nn.ModuleList, nn.Sequential)) and len(child) == L
                   or isinstance(child, nn.ModuleDict)), None)  # named_parts keeps a container only if it holds the blocks
    if blocks is None:
        raise Wrong(f"expected your GPT to hold its {L} blocks in an nn.ModuleList (or nn.Sequential or nn.ModuleDict) "
                    f"of length L = {L}.")
    norms = [(n, c) for n, c in children if c is not blocks and is_layer_norm(c, d)]
    if len(norms) != 1:
        raise Wrong(f"expected one final LayerNorm LN_f (a submodule with gamma and beta of shape ({d},)) beside the "
                    f"blocks; found {len(norms)}.")
    inside = {id(p) for c in (blocks, norms[0][1]) for p in c.parameters()}
    own = [(n, p) for n, p in module.named_parameters() if id(p) not in inside]
    vocab = [(n, p) for n, p in own if roles.orientations(p, V, d)]
    positions = [(n, p) for n, p in own if roles.orientations(p, T_max, d)]
    extra = [n for n, p in own if (n, p) not in vocab and (n, p) not in positions]
    if not positions:
        raise Wrong(f"your GPT has no positional embedding P of shape ({T_max}, {d}) (T_max x d, or d x T_max): Section 5 adds "
                    "P[t] to E[x_t], without it attention cannot tell positions apart.")
    if not 1 <= len(vocab) <= 2 or any(p.dim() != 1 for n, p in own if n in extra):
        shapes = ", ".join(f"{n} {tuple(p.shape)}" for n, p in own)
        raise Wrong(f"expected E ({V}, {d}), P ({T_max}, {d}) and W_U ({d}, {V}) (or nn.Linear's ({V}, {d})) outside "
                    f"the blocks; yours: {shapes}.")
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


def judge_gpt(module: nn.Module, V: int, T_max: int, d: int, H: int | None, L: int, d_ff: int, seed: int = 0):
    """The loaded reference GPT under which `module` computes Section 5's logits; Wrong naming the mistake otherwise."""
    parts = gpt_parts(module, V, T_max, d, L)
    zero_extra(module, parts["extra"])
    blocks = [judge_block(block, d, H, d_ff, seed=seed + l, where=f"block {l}") for l, block in enumerate(parts["blocks"])]
    ln_name, ln_f = parts["ln_f"]
    try:
        ln_f_reading = judge_layer_norm(ln_f, d)
    except Wrong as wrong:
        raise Wrong(f"your final LayerNorm {ln_name} fails on its own: {wrong.message}") from None
    H = heads_of(block_parts(parts["blocks"][0], d, d_ff)["attn"][0][1], H)
    config = GPTConfig(V=V, T_max=T_max, d=d, H=H, L=L, d_ff=d_ff, tie_weights=parts["W_U"] is None)
    reference = ReferenceGPT(config).double()
    loaded(reference.ln_f, ln_f_reading.weights)
    tables = [{"E": E, "P": P} | ({} if W_U is None else {"W_U": W_U})
              for E in parts["E"] for P in parts["P"] for W_U in (parts["W_U"] or [None])]  # one unless a shape is square
    idx = torch.randint(0, V, (B, min(T, T_max)), generator=torch.Generator().manual_seed(seed))
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
        for block in model.blocks:
            X = block(X, explicit=True)
        return (model.ln_f(X) if final else X) @ model.unembedding

    def mistakes(choice):
        model = with_blocks(choice)
        E = F.embedding(idx, model.E)
        return {
            "P is not added: X^(0)_t = E[x_t] + P[t]": lambda: logits(choice, E),
            "the final LayerNorm LN_f is missing: Z = LN_f(X^(L)) W_U": lambda: logits(choice, final=False),
            "P is read from its last rows: position t uses P[t], the first T rows":
                lambda: logits(choice, E + model.P[-idx.shape[1]:]),
            "your model returns probabilities (a softmax of the logits): Section 5's Z are the logits themselves":
                lambda: logits(choice).softmax(-1),
        }

    inner = sorted({f"{name}" for found in blocks for reading in found.values() for name in reading.extra})
    parts["extra"] = parts["extra"] + [f"{name} (in every block)" for name in inner]
    judge(got, choices, lambda c: logits(c), mistakes, "GPT", extra_note(parts["extra"]))
    return parts


@checker("Build step 6: the GPT")
def check_gpt(gpt, V: int | None = None, T_max: int | None = None, d: int | None = None, H: int | None = None,
              L: int | None = None, d_ff: int | None = None) -> tuple[str, list[str]]:
    """Section 5: `gpt` is your class (built as GPT(V, T_max, d, H, L, d_ff)) or a module (give its sizes);
    ids (B, T) -> logits (B, T, V). Each block and LN_f are checked alone, then the logits."""
    sizes = {"V": V, "T_max": T_max, "d": d, "H": H, "L": L, "d_ff": d_ff}
    if isinstance(gpt, nn.Module):
        missing = [k for k in ("V", "T_max", "d", "L") if sizes[k] is None]
        if missing:
            raise ValueError(f"give the sizes of a built model: {', '.join(m + '=...' for m in missing)}")
        sizes["d_ff"] = d_ff or 4 * d
    else:
        sizes = {k: v or SIZES[k] for k, v in sizes.items()}
    order = ("V", "T_max", "d", "H", "L", "d_ff")
    module = built(gpt, *(sizes[k] for k in order), what=", ".join(f"{k}={sizes[k]}" for k in order))
    with random_weights(module, seed=0):
        parts = judge_gpt(module, **sizes)
    tied = " (W_U tied to E^T)" if parts["W_U"] is None else ""
    return (f"every block and LN_f pass alone, and the logits equal Section 5's Z = LN_f(X^(L)) W_U{tied} to within "
            "the float32 tolerance."), [", ".join(f"{k} = {v}" for k, v in sizes.items()), *extra_note(parts["extra"])]


# ---- Project aside 5.2: the initialization ---------------------------------------------------

INIT_SIZES = {"V": 65, "T_max": 64, "d": 64, "H": 4, "L": 3, "d_ff": 256}  # enough entries for a std to 2%
STD = 0.02
STD_RTOL = 0.1  # a measured std within 10% of the expected one (its sampling error here is at most 2%)


def init_groups(module: nn.Module, sizes: dict) -> dict[str, list[torch.Tensor]]:
    """The learner's initialised tensors grouped by what Project aside 5.2 does to them. Roles are read by
    shape, name and order only (roles' first reading): a standard deviation does not depend on a
    matrix's orientation, nor on which of W_Q, W_K, W_V is which."""
    V, T_max, d, H, L, d_ff = (sizes[k] for k in ("V", "T_max", "d", "H", "L", "d_ff"))
    parts = gpt_parts(module, V, T_max, d, L)
    groups = {"W_O, W_2": [], "other matrices": [parts["E"][0], parts["P"][0]], "gains": [], "biases": []}
    if parts["W_U"] is not None:
        groups["other matrices"].append(parts["W_U"][0])
    for block in [*parts["blocks"], None]:
        if block is None:
            norms = [parts["ln_f"]]
        else:
            found = block_parts(block, d, d_ff)
            norms = found["ln"]
            attention = roles.attention_readings(found["attn"][0][1], d, heads_of(found["attn"][0][1], H))[0].weights
            mlp = roles.mlp_readings(found["mlp"][0][1], d, d_ff)[0].weights
            groups["W_O, W_2"] += [attention["W_O"], mlp["W_2"]]
            groups["other matrices"] += [attention[k] for k in ("W_Q", "W_K", "W_V")] + [mlp["W_1"]]
            groups["biases"] += [attention["b_O"], mlp["b_1"], mlp["b_2"]]
        for _, norm in norms:
            gamma_beta = roles.layer_norm_readings(norm, d)[0].weights
            groups["gains"].append(gamma_beta["gamma"])
            groups["biases"].append(gamma_beta["beta"])
    return groups


def pooled_std(tensors: list[torch.Tensor]) -> float:
    return torch.cat([t.detach().reshape(-1).double() for t in tensors]).std().item()


@checker("Build step 7: the initialization")
def check_init(init_weights, gpt) -> tuple[str, list[str]]:
    """Project aside 5.2: init_weights(model) initialises your GPT (class `gpt`, built at INIT_SIZES) in place:
    weight matrices, E and P ~ N(0, 0.02^2), W_O and W_2 ~ N(0, (0.02 / sqrt(2L))^2), gains 1, biases 0."""
    torch.manual_seed(0)
    module = built(gpt, *INIT_SIZES.values(), what=", ".join(f"{k}={v}" for k, v in INIT_SIZES.items()))
    returned = call(init_weights, module, what="model", in_place=True)
    module = returned if isinstance(returned, nn.Module) else module
    L = INIT_SIZES["L"]
    groups = init_groups(module, INIT_SIZES)
    residual = pooled_std(groups["W_O, W_2"])
    others = pooled_std(groups["other matrices"])
    details = [f"L = {L}: expected std {STD} for E, P, W_Q, W_K, W_V, W_1, W_U and {STD / math.sqrt(2 * L):.4f} "
               f"for W_O, W_2; measured {others:.4f} and {residual:.4f}"]
    gains = torch.cat([g.detach().reshape(-1) for g in groups["gains"]])
    biases = torch.cat([b.detach().reshape(-1) for b in groups["biases"]])
    if not torch.equal(gains, torch.ones_like(gains)):
        raise Wrong("the LayerNorm gains gamma are not all 1: a LayerNorm starts as the plain normalization.", details)
    if biases.abs().max().item() != 0:
        raise Wrong("the biases (b_O, b_1, b_2, beta) are not all 0.", details)

    near = functools.partial(close, rtol=STD_RTOL)  # near(measured std, expected std)
    scaled = STD / math.sqrt(2 * L)
    if not near(others, STD):
        if near(others, scaled):
            raise Wrong("every matrix is scaled by 1/sqrt(2L): only the branches' output projections W_O and W_2 are.", details)
        raise Wrong(f"E, P, W_Q, W_K, W_V, W_1, W_U should have std {STD} (Project aside 5.2).", details)
    typical = {
        "the init is not scaled: W_O and W_2 have std 0.02 like every other matrix; Project aside 5.2 divides it by "
        "sqrt(2L), one factor for each of the 2L writes into the residual stream": lambda: STD,
        "W_O and W_2 are scaled by 1/sqrt(L): there are 2L residual writes (two per block), so 1/sqrt(2L)":
            lambda: STD / math.sqrt(L),
        "W_O and W_2 are divided by 2L: the factor is 1/sqrt(2L) (variances add over the 2L writes)": lambda: STD / (2 * L),
    }
    if not near(residual, scaled):
        W_O, W_2 = (pooled_std(groups["W_O, W_2"][i::2]) for i in (0, 1))
        if near(W_O, scaled) != near(W_2, scaled):
            right, other = ("W_O", "W_2") if near(W_O, scaled) else ("W_2", "W_O")
            raise Wrong(f"only {right} is scaled by 1/sqrt(2L): {other} writes into the residual stream too.", details)
        named = name_mistake({(): residual}, typical, near)  # the point (): each std takes no arguments
        raise Wrong((named or f"W_O and W_2 should have std 0.02 / sqrt(2L) = {scaled:.4f}") + ".", details)
    return "matrices std 0.02, W_O and W_2 std 0.02 / sqrt(2L), gains 1, biases 0 (Project aside 5.2).", details


def attempt(factory):
    """factory() (your model built from the steps above), or None after printing "not attempted yet" while a
    stub still raises NotImplementedError, so that the cells using your model skip instead of failing."""
    try:
        return factory()
    except NotImplementedError as stub:
        print(f"not attempted yet: a stub still raises NotImplementedError ({stub}); finish the steps above first.")
        return None
