"""The residual stream as a sum of writes (Remark 3.4), and what each write says to the logits.

In a pre-norm GPT nothing overwrites the stream: every head, every attention bias and every MLP
adds its output to it. So the final stream is a plain sum,

    X^(L) = E[x] + P + sum over l of ( sum_h A^h LN_1(X^(l)) W_OV^h  +  b_O  +  MLP(LN_2(Y^(l))) ),

one term per write. The logits Z = LN_f(X^(L)) W_U are not linear in X^(L), but LN_f is linear
once its scale s = sqrt(sigma(X^(L))^2 + eps) is frozen at the run's value: centring is the
projection C = I - (1/d) 1 1^T (Proposition 4.2), so

    Z = sum over writes w of  (C w) * gamma / s  W_U   +   beta W_U.

Each term is that write's *direct* contribution to the logits; beta W_U is LN_f's own part.
What the frozen scale hides is that s itself depends on every write: a write's total effect on
the prediction also includes what it changes in s and in everything later layers read.

    writes = stream_writes(model, idx)           every write, labelled           (n, B, T, d)
    pieces = logit_pieces(model, writes)          direct contributions            (n, B, T, V)
    direct_logit_attribution(model, idx, t, token, against=None)  one number per write
    logit_lens(model, idx, targets)               the loss of X^(l) read out through LN_f and W_U, l = 0..L

Labels: "E[x]" and "P" for the embedding's two parts; "L{l}H{h}" for head h of layer l; "L{l} b_O"
for layer l's attention bias (Definition 1.1's b_O belongs to no head); "L{l} MLP".
`replace` runs the same forward pass with chosen writes swapped for other tensors (zeros for an
ablation, another run's write for activation patching: gptlib.analysis.patching).

What every reader here (and in gptlib.analysis.patching) refuses, with one ValueError naming the argument and
the rule, before any work is done:
  - a model that is not a gptlib GPT, a post-norm GPT (its stream is no sum of writes), or a GPT with
    a NaN or inf weight (check_model, naming the weight): on such weights the fused attention kernel of
    the fast forward and the explicit path the writes follow (A^h formed, as run_with_cache) can give
    two answers (one NaN query weight: finite logits from the kernel, NaN ones from the explicit
    path), so no reader picks one;
  - token ids that break GPT.check_tokens, named as the argument they came in (idx, targets);
  - `replace` that is not a mapping {label: tensor} (or None), names a write the model does not make,
    or holds something other than a tensor of the model's dtype and device broadcastable to one
    write (B, T, d);
  - `writes` that are not a StreamWrites of the model's width d and dtype with one label per write
    (which labels is not checked: notebook 10 reads a decomposition broken on purpose);
  - `scale` that is not a floating-point tensor broadcastable to (B, T, 1), or holds an entry that is
    NaN, inf, 0 or negative (LN_f's s = sqrt(sigma^2 + eps) is never one of them);
  - row, position, token and against outside [0, B), [0, T) and [0, V) (a negative one is not read
    from the end), and `pieces` and `Z` of two different runs (attribution_from).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .. import validation
from ..model import GPT, eval_mode
from .attention import head_contributions
from .cache import run_with_cache, screened


def head_label(l: int, h: int) -> str:
    return f"L{l}H{h}"


def write_labels(model: GPT) -> tuple[str, ...]:
    """Every write into the stream of `model`, in the order the forward pass makes them."""
    if not isinstance(model, GPT):
        raise ValueError(f"model must be a gptlib GPT, got {type(model).__name__}")
    c = model.config
    labels = ["E[x]", "P"]
    for l in range(c.L):
        labels += [head_label(l, h) for h in range(c.H)] + [f"L{l} b_O"]
        if not c.attn_only:
            labels.append(f"L{l} MLP")
    return tuple(labels)


@dataclass(frozen=True)
class StreamWrites:
    """Every write into the residual stream of one run: labels[i] wrote stack[i] (B, T, d)."""

    labels: tuple[str, ...]
    stack: torch.Tensor  # (n, B, T, d)

    def __getitem__(self, label: str) -> torch.Tensor:  # (B, T, d)
        if label not in self.labels:
            raise ValueError(f"no write labelled {label!r}; the writes are {', '.join(self.labels)}")
        return self.stack[self.labels.index(label)]

    @property
    def final_stream(self) -> torch.Tensor:  # X^(L), (B, T, d)
        return self.stack.sum(dim=0)


def check_model(model) -> GPT:
    """model itself, if the readers can read it: a pre-norm gptlib GPT whose weights are all finite."""
    model = screened(model)
    if model.config.norm != "pre":
        raise ValueError("the stream is a sum of writes only in a pre-norm GPT (Definition 3.1); "
                         "a post-norm block rescales the whole stream after each write (Aside 3.5)")
    return model


def _batch_of_ids(model: GPT, idx, name: str = "idx") -> torch.Tensor:
    idx = model.check_tokens(idx, name=name)
    return idx if idx.dim() == 2 else idx.unsqueeze(0)  # (B, T)


def _replacements(model: GPT, replace, B: int, T: int) -> dict[str, torch.Tensor]:
    """replace checked: None, or a mapping from write labels to tensors of the model's dtype and device
    that broadcast to one write (B, T, d)."""
    if replace is None:
        return {}
    if not isinstance(replace, Mapping):
        raise ValueError(f"replace must be a mapping {{label: tensor}} or None, got {type(replace).__name__}")
    labels = write_labels(model)
    unknown = [label for label in replace if label not in labels]
    if unknown:
        raise ValueError(f"replace names writes this model does not make: {', '.join(map(repr, unknown))}; "
                         f"the writes are {', '.join(labels)}")
    write = (B, T, model.config.d)
    for label, tensor in replace.items():
        rule = (f"replace[{label!r}] must be a tensor of the model's dtype {model.E.dtype} broadcastable to "
                f"(B, T, d) = {write}")
        if not isinstance(tensor, torch.Tensor):
            raise ValueError(f"{rule}, got {_shape_of(tensor)}")
        if tensor.dtype != model.E.dtype or tensor.device != model.E.device:
            raise ValueError(f"{rule} on {model.E.device}, got dtype {tensor.dtype} on {tensor.device}")
        if not _broadcasts(tensor, write):
            raise ValueError(f"{rule}, got {_shape_of(tensor)}")
    return dict(replace)


def _shape_of(x) -> str:
    return f"shape {tuple(x.shape)}" if isinstance(x, torch.Tensor) else type(x).__name__


def _broadcasts(tensor: torch.Tensor, shape: tuple[int, ...]) -> bool:
    """Whether tensor.expand(*shape) works: no more dimensions than shape, each 1 or equal to shape's."""
    return tensor.dim() <= len(shape) and all(n in (1, m) for n, m in zip(reversed(tensor.shape), reversed(shape)))


@torch.no_grad()
def stream_writes(model: GPT, idx, replace: Mapping[str, torch.Tensor] | None = None) -> StreamWrites:
    """Run `model` on token ids idx (T,) or (B, T) keeping every write apart: X^(L) = writes.final_stream.

    replace: {label: tensor broadcastable to (B, T, d)} writes used instead of the ones the run makes;
    later layers read the stream with the replacement in it.
    """
    model = check_model(model)
    idx = _batch_of_ids(model, idx)
    B, T = idx.shape
    replace = _replacements(model, replace, B, T)
    writes: list[torch.Tensor] = []

    def add(label: str, write: torch.Tensor) -> torch.Tensor:  # (B, T, d) -> the same, or its replacement
        write = replace[label].expand(B, T, model.config.d) if label in replace else write.expand(B, T, -1)
        writes.append(write)
        return write

    with eval_mode(model):
        X = add("E[x]", F.embedding(idx, model.E)) + add("P", model.P[:T])  # X^(0), (B, T, d)
        for l, block in enumerate(model.blocks):
            heads = head_contributions(block.attn, block.ln_1(X))  # (B, H, T, d): A^h LN_1(X) W_OV^h
            for h in range(model.config.H):
                X = X + add(head_label(l, h), heads[:, h])
            X = X + add(f"L{l} b_O", block.attn.b_O)  # Y^(l)
            if not model.config.attn_only:
                X = X + add(f"L{l} MLP", block.mlp(block.ln_2(X)))  # X^(l+1)
    return StreamWrites(write_labels(model), torch.stack(writes))


@dataclass(frozen=True)
class LogitPieces:
    """The logits of one run split by write: Z = direct.sum(0) + ln_f_bias, with LN_f's scale frozen."""

    labels: tuple[str, ...]
    direct: torch.Tensor  # (n, B, T, V): (C w) * gamma / s W_U for each write w
    ln_f_bias: torch.Tensor  # (V,): beta W_U

    @property
    def total(self) -> torch.Tensor:  # (B, T, V)
        return self.direct.sum(dim=0) + self.ln_f_bias


def ln_f_scale(model: GPT, X: torch.Tensor) -> torch.Tensor:
    """s = sqrt(sigma(X)^2 + eps) of LN_f for each row of the final stream X (B, T, d): (B, T, 1)."""
    return torch.sqrt(X.var(dim=-1, unbiased=False, keepdim=True) + model.ln_f.eps)


@torch.no_grad()
def logit_pieces(model: GPT, writes: StreamWrites, scale: torch.Tensor | None = None) -> LogitPieces:
    """Each write's direct contribution to the logits through LN_f, its scale frozen at the run's value.

    scale: LN_f's s (B, T, 1); by default the one the run's final stream gives (ln_f_scale). Passing
    another one is how the notebook shows that the pieces then no longer add up to the logits.
    """
    model = check_model(model)
    stack = _checked_writes(model, writes).stack  # (n, B, T, d)
    B, T = stack.shape[1:3]
    if scale is None:
        s = ln_f_scale(model, writes.final_stream)
    else:
        s = _checked_scale(scale, B, T)
    centred = stack - stack.mean(dim=-1, keepdim=True)  # C w for every write
    direct = (centred * model.ln_f.gamma / s) @ model.unembedding  # (n, B, T, V)
    return LogitPieces(writes.labels, direct, model.ln_f.beta @ model.unembedding)


def _checked_writes(model: GPT, writes) -> StreamWrites:
    """writes itself, if `model` can read it: a StreamWrites whose stack (n, B, T, d) has the model's
    width d and dtype, and one label per write (which labels is not checked: notebook 10 reads broken ones)."""
    if not isinstance(writes, StreamWrites):
        raise ValueError(f"writes must be a StreamWrites (decomposition.stream_writes), got {type(writes).__name__}")
    stack = writes.stack
    rule = f"writes must be a stack (n, B, T, d) of this model's dtype {model.E.dtype} with d = {model.config.d}"
    if not isinstance(stack, torch.Tensor) or stack.dim() != 4 or stack.shape[-1] != model.config.d:
        raise ValueError(f"{rule}, got {_shape_of(stack)}")
    if stack.dtype != model.E.dtype or stack.device != model.E.device:
        raise ValueError(f"{rule} on {model.E.device}, got dtype {stack.dtype} on {stack.device}")
    if len(writes.labels) != len(stack):
        raise ValueError(f"writes must have one label per write, got {len(writes.labels)} labels for {len(stack)}")
    return writes


def _checked_scale(scale, B: int, T: int) -> torch.Tensor:
    """scale itself, if it can stand for LN_f's s (B, T, 1): a floating-point tensor that broadcasts to it,
    every entry finite and > 0 (s = sqrt(sigma^2 + eps) is never 0: dividing by it must mean something)."""
    rule = f"scale must be LN_f's s, a floating-point tensor broadcastable to (B, T, 1) = {(B, T, 1)}"
    if isinstance(scale, torch.Tensor) and not scale.dtype.is_floating_point:
        raise ValueError(f"{rule}, got dtype {scale.dtype}")
    if not isinstance(scale, torch.Tensor) or not _broadcasts(scale, (B, T, 1)):
        raise ValueError(f"{rule}, got {_shape_of(scale)}")
    bad = ~(torch.isfinite(scale) & (scale > 0))  # NaN, inf, 0 and negative entries
    if bad.any():
        where = tuple(bad.nonzero()[0].tolist())
        raise ValueError(f"scale (LN_f's s) must be finite and > 0 in every entry, got {scale[where].item()} "
                         f"at {where}")
    return scale


def decomposition_gap(Z: torch.Tensor, total: torch.Tensor) -> float:
    """max |total - Z| / (1 + max |Z|): how far a sum of pieces is from the model's own logits."""
    for name, x in (("Z", Z), ("total", total)):
        if not isinstance(x, torch.Tensor) or not x.dtype.is_floating_point or x.numel() == 0:
            raise ValueError(f"{name} must be a non-empty floating-point tensor, got {_shape_of(x)}")
    if Z.shape != total.shape:
        raise ValueError(f"Z and total must have one shape, got {tuple(Z.shape)} and {tuple(total.shape)}")
    return ((total - Z).abs().max() / (1 + Z.abs().max())).item()


@dataclass(frozen=True)
class Attribution:
    """One number per write: its direct contribution to a logit (or a logit difference)."""

    labels: tuple[str, ...]
    values: torch.Tensor  # (n,)
    rest: float  # LN_f's bias beta W_U at that logit (or difference): the part no write owns
    logit: float  # the model's own logit (or difference): values.sum() + rest, up to rounding

    def of(self, label: str) -> float:
        if label not in self.labels:
            raise ValueError(f"no write labelled {label!r}; the writes are {', '.join(self.labels)}")
        return self.values[self.labels.index(label)].item()


def _position_and_tokens(T: int, V: int, position, token, against):
    """position in [0, T), token and against (or None) in [0, V), as ints."""
    position = validation.integer("position", position, at_least=0, at_most=T - 1)
    token = validation.integer("token", token, at_least=0, at_most=V - 1)
    if against is not None:
        against = validation.integer("against", against, at_least=0, at_most=V - 1)
    return position, token, against


def attribution_from(pieces: LogitPieces, Z: torch.Tensor, position: int, token: int,
                     against: int | None = None, row: int = 0) -> Attribution:
    """The direct contributions at (row, position) to logit `token`, or to logit token - logit against.

    pieces: a LogitPieces (n, B, T, V); Z: logits (B, T, V) of the same run; row in [0, B), position
    in [0, T), token and against in [0, V) (no negative index counts from the end).
    """
    if not isinstance(pieces, LogitPieces):
        raise ValueError(f"pieces must be a LogitPieces (decomposition.logit_pieces), got {type(pieces).__name__}")
    n, B, T, V = pieces.direct.shape
    if not isinstance(Z, torch.Tensor) or tuple(Z.shape) != (B, T, V):
        raise ValueError(f"Z must be the run's logits of shape (B, T, V) = {(B, T, V)}, got {_shape_of(Z)}")
    row = validation.integer("row", row, at_least=0, at_most=B - 1)
    position, token, against = _position_and_tokens(T, V, position, token, against)

    def at(t: torch.Tensor) -> torch.Tensor:  # (..., V) -> (...)
        return t[..., token] - (t[..., against] if against is not None else 0)

    return Attribution(pieces.labels, at(pieces.direct[:, row, position]), at(pieces.ln_f_bias).item(),
                       at(Z[row, position]).item())


@torch.no_grad()
def direct_logit_attribution(model: GPT, idx, position: int, token: int, against: int | None = None) -> Attribution:
    """Each write's direct contribution to the logit of `token` at `position` of one sequence idx (T,),
    or to the logit difference token - against."""
    model = check_model(model)
    idx = model.check_tokens(idx, name="idx")
    if idx.dim() != 1:
        raise ValueError(f"idx must be one sequence of token ids (T,), got shape {tuple(idx.shape)}")
    position, token, against = _position_and_tokens(idx.shape[-1], model.config.V, position, token, against)
    writes = stream_writes(model, idx)
    with eval_mode(model):
        Z = model(idx.unsqueeze(0))  # (1, T, V)
    return attribution_from(logit_pieces(model, writes), Z, position, token, against)


@dataclass(frozen=True)
class LensReading:
    """The stream after each block read out as if it were the last: depth l = 0 (embeddings) .. L."""

    loss: torch.Tensor  # (L + 1,): mean cross-entropy, nats per token
    entropy: torch.Tensor  # (L + 1,): mean entropy of the read-out distribution, nats
    top1: torch.Tensor  # (L + 1,): share of positions whose most likely token is the target


@torch.no_grad()
def logit_lens(model: GPT, idx, targets) -> LensReading:
    """Read X^(l) out through LN_f and W_U for every depth l: the logit lens.

    At l = L this is the model's own prediction, so loss[L] is its loss on (idx, targets).
    """
    model = check_model(model)
    idx = _batch_of_ids(model, idx)
    targets = _batch_of_ids(model, targets, name="targets")
    if targets.shape != idx.shape:
        raise ValueError(f"targets must have the shape of idx {tuple(idx.shape)}, got {tuple(targets.shape)}")
    with eval_mode(model):
        _, cache = run_with_cache(model, idx)
    loss, entropy, top1 = [], [], []
    for l in range(model.config.L + 1):
        Z = model.ln_f(cache.X(l)) @ model.unembedding  # (B, T, V)
        log_p = Z.log_softmax(dim=-1)
        loss.append(F.cross_entropy(Z.flatten(0, 1), targets.flatten()))
        entropy.append(-(log_p.exp() * log_p).sum(dim=-1).mean())
        top1.append((Z.argmax(dim=-1) == targets).double().mean())
    return LensReading(torch.stack(loss), torch.stack(entropy), torch.stack(top1).float())
