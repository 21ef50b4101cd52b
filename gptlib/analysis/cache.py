"""Run a GPT once and keep every named intermediate, under the lecture's symbols.

    Z, cache = run_with_cache(model, idx)
    cache.X(0)            X^(0) = E[x] + P         (B, T, d)
    cache.Y(l)            Y^(l), after attention     (B, T, d)
    cache.X(l + 1)        X^(l+1), after the MLP     (B, T, d)
    cache.A(l)            A^h for every head h       (B, H, T, T)
    cache.ln_1(l), cache.ln_2(l), cache.ln_f          LayerNorm outputs (B, T, d)
    cache.attn_write(l)   MHA(LN_1(X^(l)))           (B, T, d)
    cache.mlp_write(l)    MLP(LN_2(Y^(l)))           (B, T, d)
    cache.Z               logits                     (B, T, V)

shape_table(rows) writes such a trace as text, one line per (symbol, tensor, meaning), for a notebook to print.

The model computes nothing for the cache: `recording(model, into)` registers a torch forward hook on
each module of model.intermediates() (the blocks' LayerNorms, attentions and MLPs, and the hook points
X^(l), Y^(l), A^h, Z) that files its output under the intermediate's name, and removes them afterwards.

Every public function of gptlib.analysis that reads a model's weights is decorated with `reads_model`:
its first argument must be a gptlib GPT whose weights are all finite (validation.finite_weights names
the first NaN or inf weight), checked once on entry. The model's own forward (GPT.forward, the training
path) does not scan its weights: the training loop checks them itself, and on a NaN weight the fused
attention kernel and the explicit path (A^h formed, as run_with_cache) can give two different answers
(one NaN query weight: finite logits from the kernel, NaN ones from the explicit path), so no analysis
picks one.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from .. import validation
from ..model import BLOCK_INTERMEDIATES, GPT, attention_matrices_formed, intermediate_key


@dataclass(frozen=True)
class Cache:
    """Named intermediates of one forward pass; tensors keep their batch dimension."""

    tensors: dict[str, torch.Tensor]

    def _get(self, name: str, l: int) -> torch.Tensor:
        l = validation.integer("layer l", l)
        key = intermediate_key(name, l)
        if key in self.tensors:
            return self.tensors[key]
        if not 0 <= l < self.n_layers:
            raise ValueError(f"no {name} for layer {l}: this model has layers 0..{self.n_layers - 1}")
        recorded = [n for n in ("X",) + BLOCK_INTERMEDIATES if intermediate_key(n, l) in self.tensors]
        raise ValueError(f"no {name} in layer {l}: this run recorded only {', '.join(recorded)} there "
                       "(an attention-only model has no ln_2 or mlp_write; A is there only when the attention matrices "
                       "were formed, as run_with_cache does)")

    @property
    def n_layers(self) -> int:
        L = 0
        while intermediate_key("X", L + 1) in self.tensors:
            L += 1
        return L

    # One plain accessor per name, so that help(Cache) and completion list the lecture's symbols.
    # They repeat one shape on purpose: a generated accessor would hide the names.
    def X(self, l: int) -> torch.Tensor:
        return self._get("X", l)

    def Y(self, l: int) -> torch.Tensor:
        return self._get("Y", l)

    def A(self, l: int) -> torch.Tensor:
        return self._get("A", l)

    def ln_1(self, l: int) -> torch.Tensor:
        return self._get("ln_1", l)

    def ln_2(self, l: int) -> torch.Tensor:
        return self._get("ln_2", l)

    def attn_write(self, l: int) -> torch.Tensor:
        return self._get("attn_write", l)

    def mlp_write(self, l: int) -> torch.Tensor:
        return self._get("mlp_write", l)

    @property
    def ln_f(self) -> torch.Tensor:
        return self.tensors["ln_f"]

    @property
    def Z(self) -> torch.Tensor:
        return self.tensors["Z"]


def screened(model) -> GPT:
    """model itself, if an analysis can read it: a gptlib GPT whose weights are all finite (a NaN or inf
    weight is refused, naming the first such weight: validation.finite_weights)."""
    if not isinstance(model, GPT):
        raise ValueError(f"model must be a gptlib GPT, got {type(model).__name__}")
    return validation.finite_weights(model)


def reads_model(fn):
    """fn, its first argument `model` screened (screened) before fn runs: the one guard of every analysis
    that reads a model's weights."""

    @functools.wraps(fn)
    def reading(model, *args, **kwargs):
        return fn(screened(model), *args, **kwargs)

    return reading


def _file(into: dict, key: str, module, inputs, output: torch.Tensor) -> None:
    into[key] = output


@contextlib.contextmanager
def recording(module, into: dict) -> Iterator[dict]:
    """For the duration, each forward pass of `module` (a GPT, or one block) files its named intermediates
    in the dict `into`, under the keys of module.intermediates(): by forward hooks, removed afterwards."""
    if not callable(getattr(module, "intermediates", None)):
        raise ValueError(f"module must be a gptlib GPT or block, got {type(module).__name__}")
    if not isinstance(into, dict):
        raise ValueError(f"into must be a dict, got {type(into).__name__}")
    handles = [part.register_forward_hook(functools.partial(_file, into, key))
               for key, part in module.intermediates().items()]
    try:
        yield into
    finally:
        for handle in handles:
            handle.remove()


@reads_model
def run_with_cache(model: GPT, idx: torch.Tensor) -> tuple[torch.Tensor, Cache]:
    """One forward pass with every A^h formed (attention_matrices_formed); returns the logits and the Cache.

    A 1-D idx is treated as a batch of one: the logits come back as (T, V) and every
    cached tensor keeps a leading batch dimension of 1.
    """
    tensors: dict[str, torch.Tensor] = {}
    with attention_matrices_formed(model), recording(model, tensors):
        Z = model(idx)
    return Z, Cache(tensors)


def shape_table(rows, width: int = 22) -> str:
    """One line per (symbol, tensor, meaning): the symbol padded to `width`, then the shape, then the meaning."""
    return "\n".join(f"{symbol:<{width}}{str(tuple(tensor.shape)):<18}{meaning}" for symbol, tensor, meaning in rows)
