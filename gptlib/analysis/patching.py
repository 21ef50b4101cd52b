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

    induction_patching_prompts(tokens, seed)   clean rows said twice and their corrupted copies,
                                                with the positions and targets the metric reads
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from .. import validation
from ..model import GPT
from .decomposition import head_label, logit_pieces, stream_writes


def logits_from_writes(model: GPT, writes) -> torch.Tensor:
    """Z (B, T, V) of a run whose writes are `writes` (a StreamWrites): LN_f(sum of writes) W_U."""
    return logit_pieces(model, writes).total


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
    idx = validation.token_ids(idx, model.config.V, T_max=model.config.T_max, dims=(2,), name="idx")
    positions = validation.token_ids(positions, idx.shape[1], dims=(1,), name="positions")  # each in [0, T)
    targets = validation.token_ids(targets, model.config.V, dims=(2,), name="targets")
    if targets.shape != (idx.shape[0], positions.shape[0]):
        raise ValueError(f"targets must have shape (B, k) = {(idx.shape[0], positions.shape[0])}, "
                         f"got {tuple(targets.shape)}")
    L, H = model.config.L, model.config.H
    clean = stream_writes(model, idx)
    pieces = logit_pieces(model, clean)
    logit = _target_logits(pieces.total, positions, targets).mean()
    direct, drop = torch.empty(L, H), torch.empty(L, H)
    for l in range(L):
        for h in range(H):
            label = head_label(l, h)
            direct[l, h] = _target_logits(pieces.direct[pieces.labels.index(label)], positions, targets).mean()
            ablated = stream_writes(model, idx, replace={label: torch.zeros(model.config.d)})
            drop[l, h] = logit - _target_logits(logits_from_writes(model, ablated), positions, targets).mean()
    return HeadEffects(direct, drop)


@torch.no_grad()
def patching_restoration(model: GPT, clean, corrupted, metric: Callable[[torch.Tensor], float]) -> torch.Tensor:
    """(L, H): for each head, (metric(patched) - metric(corrupted)) / (metric(clean) - metric(corrupted)),
    where `patched` is the corrupted run with that head's write (at every position) taken from the clean run.

    metric maps logits (B, T, V) to a number. 1 means the head alone restores the clean behaviour,
    0 that it restores nothing.
    """
    clean_writes = stream_writes(model, clean)
    base = metric(logits_from_writes(model, stream_writes(model, corrupted)))
    gap = metric(logits_from_writes(model, clean_writes)) - base
    if not abs(gap) > 0:
        raise ValueError("the metric is the same on the clean and the corrupted run: there is nothing to restore")
    L, H = model.config.L, model.config.H
    restored = torch.empty(L, H)
    for l in range(L):
        for h in range(H):
            label = head_label(l, h)
            patched = stream_writes(model, corrupted, replace={label: clean_writes[label]})
            restored[l, h] = (metric(logits_from_writes(model, patched)) - base) / gap
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
        log_p = Z[:, self.positions].log_softmax(dim=-1)  # (B, k, V)
        return log_p.gather(-1, self.targets.unsqueeze(-1)).mean().item()


def induction_patching_prompts(tokens: torch.Tensor, V: int, seed: int = 0) -> PatchingPrompts:
    """Corrupt rows of n tokens said twice (B, 2n): characters at even places of the first copy are
    redrawn uniformly from the other V - 1 characters (torch.Generator seeded with `seed`)."""
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
