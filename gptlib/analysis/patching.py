"""Which heads a prediction needs: ablation and activation patching, on the stream's writes.

A head's direct contribution (gptlib.analysis.decomposition) counts only what its write says to the
logits through LN_f. A head can matter without saying anything directly: a previous-token
head in layer 0 writes what the induction head of layer 1 reads. Two interventions measure
the total effect instead, both by rerunning the model with one write changed
(decomposition.stream_writes(..., replace=...)), so every later layer sees the change:

    ablation_effects(model, idx, positions, targets)  each head's direct contribution to the targets'
                                                     logits, and how much they drop when its write is 0
    patching_restoration(model, clean, corrupted, metric)
        each head's write in the corrupted run replaced by its write in the clean run, in turn:
        the fraction of (metric(clean) - metric(corrupted)) that it brings back, (L, H)

and, for the induction model of notebook 08,

    induction_patching_prompts(tokens, V, seed)   clean rows said twice and their corrupted copies,
                                                   with the positions and targets the metric reads

Refused with one ValueError naming the argument, on top of gptlib.analysis.decomposition's rules for the
model (a pre-norm GPT with finite weights), the writes and the token ids: positions outside [0, T)
of the sequence (the message cites T); clean and corrupted of different shapes, also where one is
a single row (row b of one is the counterpart of row b of the other, and the metric averages over
rows); a metric that is not callable, or returns anything but a finite real number or a tensor of
one element holding one (NaN, inf, a bool, a string, None, a larger tensor), on any run, the run
named; V not an integer >= 2 (a corrupted character needs another one) and a seed outside
[0, 2^64 - 1] (validation.seed, as make_deterministic's).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from .. import validation
from ..model import GPT
from .decomposition import _checked_writes, check_model, head_label, logit_pieces, stream_writes


@torch.no_grad()
def logits_from_writes(model: GPT, writes) -> torch.Tensor:
    """Z (B, T, V) of a run whose writes are `writes` (a StreamWrites of this model's width d):
    LN_f(sum of writes) W_U, the sum of logit_pieces' parts computed once for the whole stream."""
    model = check_model(model)
    X = _checked_writes(model, writes).final_stream  # (B, T, d)
    return model.ln_f(X) @ model.unembedding


@dataclass(frozen=True)
class HeadEffects:
    """Per head (L, H), averaged over the rows and positions asked about: its direct contribution to the
    target's logit, and how much that logit drops when the head's write is set to 0 (zero ablation)."""

    direct: torch.Tensor  # (L, H)
    ablated_drop: torch.Tensor  # (L, H)


def _target_logits(Z: torch.Tensor, positions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Z[b, positions[j], targets[b, j]] for every row b and place j: (B, k)."""
    return Z[:, positions].gather(-1, targets.unsqueeze(-1)).squeeze(-1)


@torch.no_grad()
def ablation_effects(model: GPT, idx, positions, targets) -> HeadEffects:
    """Token ids idx (B, T); positions (k,) and the token ids targets (B, k) whose logits are read there."""
    model = check_model(model)
    idx = validation.token_ids(idx, model.config.V, T_max=model.config.T_max, dims=(2,), name="idx")
    positions = validation.positions(positions, idx.shape[1])  # each in [0, T)
    targets = validation.token_ids(targets, model.config.V, dims=(2,), name="targets")
    if targets.shape != (idx.shape[0], positions.shape[0]):
        raise ValueError(f"targets must have shape (B, k) = {(idx.shape[0], positions.shape[0])}, "
                         f"got {tuple(targets.shape)}")
    L, H = model.config.L, model.config.H
    clean = stream_writes(model, idx)
    pieces = logit_pieces(model, clean)
    logit = _target_logits(logits_from_writes(model, clean), positions, targets).mean()  # as the ablated runs' below
    direct, drop = torch.empty(L, H), torch.empty(L, H)
    for l in range(L):
        for h in range(H):
            label = head_label(l, h)
            direct[l, h] = _target_logits(pieces.direct[pieces.labels.index(label)], positions, targets).mean()
            ablated = stream_writes(model, idx, replace={label: torch.zeros(model.config.d)})
            drop[l, h] = logit - _target_logits(logits_from_writes(model, ablated), positions, targets).mean()
    return HeadEffects(direct, drop)


def _metric_value(metric: Callable, Z: torch.Tensor, run: str) -> float:
    """metric(Z) as a float: a finite real number, or a tensor of one element holding one."""
    value = metric(Z)
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    try:
        return validation.real("metric", value)  # never a bool, a string, None, NaN or inf
    except ValueError:
        shown = f"a tensor of shape {tuple(value.shape)}" if isinstance(value, torch.Tensor) else repr(value)
        raise ValueError(f"metric must return a finite number (a float, or a tensor of one element) on the {run}, "
                         f"got {shown}") from None


@torch.no_grad()
def patching_restoration(model: GPT, clean, corrupted, metric: Callable[[torch.Tensor], float]) -> torch.Tensor:
    """(L, H): for each head, (metric(patched) - metric(corrupted)) / (metric(clean) - metric(corrupted)),
    where `patched` is the corrupted run with that head's write (at every position) taken from the clean run.

    clean and corrupted: token ids (T,) or (B, T) of one shape (B, T), a 1-D one read as one row; row b
    of one is the counterpart of row b of the other. metric maps logits (B, T, V) to a finite number (a
    float, or a tensor of one element). 1 means the head alone restores the clean behaviour, 0 that it
    restores nothing.
    """
    model = check_model(model)
    clean, corrupted = (model.check_tokens(ids, name=name) for ids, name in ((clean, "clean"), (corrupted, "corrupted")))
    clean, corrupted = (ids if ids.dim() == 2 else ids.unsqueeze(0) for ids in (clean, corrupted))  # (B, T): (T,) is one row
    if clean.shape != corrupted.shape:
        raise ValueError(f"clean and corrupted must have the same shape (B, T), got "
                         f"{tuple(clean.shape)} and {tuple(corrupted.shape)}")
    if not callable(metric):
        raise ValueError(f"metric must be a function of the logits (B, T, V), got {type(metric).__name__}")
    clean_writes = stream_writes(model, clean)
    base = _metric_value(metric, logits_from_writes(model, stream_writes(model, corrupted)), "corrupted run")
    gap = _metric_value(metric, logits_from_writes(model, clean_writes), "clean run") - base
    if not abs(gap) > 0:
        raise ValueError("the metric is the same on the clean and the corrupted run: there is nothing to restore")
    L, H = model.config.L, model.config.H
    restored = torch.empty(L, H)
    for l in range(L):
        for h in range(H):
            label = head_label(l, h)
            patched = stream_writes(model, corrupted, replace={label: clean_writes[label]})
            restored[l, h] = (_metric_value(metric, logits_from_writes(model, patched), f"run patched with {label}")
                              - base) / gap
    return restored


@dataclass(frozen=True)
class PatchingPrompts:
    """Clean rows x = (a | a) and corrupted rows with every other character of the first copy replaced.

    At second-copy position t = n + i with i even, the clean row's earlier occurrence of x_t sits at i,
    followed by a_(i+1). In the corrupted row a_i is gone from the first copy while a_(i+1) stays, so
    an induction circuit can no longer find it: it needs the previous-token information at i + 1.
    """

    clean: torch.Tensor  # (B, 2n)
    corrupted: torch.Tensor  # (B, 2n)
    positions: torch.Tensor  # (k,): the second-copy positions t = n + i, i even, i + 1 < n
    targets: torch.Tensor  # (B, k): a_(i+1), the clean next character there

    def log_prob(self, Z: torch.Tensor) -> float:
        """Mean log-probability the logits Z (B, 2n, V) give the clean next character at `positions`."""
        if not isinstance(Z, torch.Tensor) or not Z.dtype.is_floating_point or Z.dim() != 3 \
                or Z.shape[:2] != self.clean.shape or Z.shape[2] <= int(self.targets.max()):
            shape = tuple(Z.shape) if isinstance(Z, torch.Tensor) else type(Z).__name__
            raise ValueError(f"Z must be floating-point logits (B, 2n, V) with (B, 2n) = {tuple(self.clean.shape)} "
                             f"and every target below V, got {shape}")
        log_p = Z[:, self.positions].log_softmax(dim=-1)  # (B, k, V)
        return log_p.gather(-1, self.targets.unsqueeze(-1)).mean().item()


def induction_patching_prompts(tokens: torch.Tensor, V: int, seed: int = 0) -> PatchingPrompts:
    """Corrupt rows of n tokens said twice (B, 2n): characters at even places of the first copy are
    redrawn uniformly from the other V - 1 characters (torch.Generator seeded with `seed`).

    V an integer >= 2 (a corrupted character needs another one to be), seed an integer in [0, 2^64 - 1].
    """
    V = validation.integer("V", V, at_least=2)
    seed = validation.seed("seed", seed)
    tokens = validation.token_ids(tokens, V, dims=(2,), name="tokens")
    B, T = tokens.shape
    n = T // 2
    if T % 2 or n < 3 or not torch.equal(tokens[:, :n], tokens[:, n:]):
        raise ValueError(f"tokens must be (B, 2n) rows of n >= 3 tokens said twice, got shape {(B, T)}")
    even = torch.arange(0, n, 2)  # places i of the first copy to corrupt
    shift = torch.randint(1, V, (B, len(even)), generator=torch.Generator().manual_seed(seed))  # never 0
    corrupted = tokens.clone()
    corrupted[:, even] = (tokens[:, even] + shift) % V  # a different character at every corrupted place
    i = torch.arange(0, n - 1, 2)  # i even with i + 1 < n
    return PatchingPrompts(tokens, corrupted, n + i, tokens[:, i + 1])
