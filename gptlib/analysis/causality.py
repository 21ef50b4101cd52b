"""Remark 5.1 and Exercise 2: does the logit row Z_t depend on the token x_s? Two measurements.

Both return a (T, T) dependency map M with M[t, s] >= 0 and M[t, s] = 0 when Z_t does not
move with x_s. For a causal GPT every entry above the diagonal (s > t) is exactly zero: the
only cross-position operation is masked attention, whose weights on future positions are
exactly 0, and 0 times anything finite adds exactly nothing. GPTConfig(causal=False) builds
the deliberately broken model on which the same maps light up above the diagonal.
"""

from __future__ import annotations

import torch

from .. import validation
from ..model import GPT
from .cache import reads_model


@reads_model
@torch.no_grad()
def perturbation_map(model: GPT, idx: torch.Tensor, shift: int = 1) -> torch.Tensor:
    """M[t, s] = max_v |Z_{t,v}(x with x_s replaced) - Z_{t,v}(x)|, shape (T, T).

    Token x_s is replaced by (x_s + shift) mod V. The original sequence and its T perturbed
    copies run as one batch, so every row goes through the same kernels.
    """
    idx = validation.token_sequence(model, idx)  # int64: x_s + shift must not wrap around in a small dtype
    V = model.config.V
    shift = validation.integer("shift", shift, at_least=1, at_most=V - 1)  # in [1, V): the token really changes
    return change_map(model(perturbed_batch(idx, shift, V)))


def perturbed_batch(idx: torch.Tensor, shifts: torch.Tensor | int, V: int) -> torch.Tensor:
    """(T+1, T) token ids: row 0 the sequence idx (T,), row 1+s the same with x_s replaced by
    (x_s + shifts[s]) mod V (one shift for every s if shifts is an int)."""
    T = idx.shape[0]
    batch = idx.repeat(T + 1, 1)  # (T+1, T)
    positions = torch.arange(T)
    batch[1 + positions, positions] = (idx + shifts) % V
    return batch


def change_map(Z: torch.Tensor) -> torch.Tensor:
    """M[t, s] = max_v |Z_{1+s, t, v} - Z_{0, t, v}|, shape (T, T), from the logits (T+1, T, V) of perturbed_batch."""
    change = (Z[1:] - Z[0]).abs().amax(dim=-1)  # (T, T): change[s, t] = max_v |dZ_{t,v}|
    return change.T  # (T, T): [t, s]


@reads_model
def gradient_map(model: GPT, idx: torch.Tensor) -> torch.Tensor:
    """M[t, s] = || dZ_t / dX^(0)_s ||_F, the Jacobian block of logits row t w.r.t. embedding row s.

    Tokens are discrete, so we differentiate with respect to the residual stream's start
    X^(0) = E[x] + P (GPT.forward_from_embeddings). One forward pass; then for each t one
    vectorized backward pass (is_grads_batched) of the V unit vectors e_v at row t gives the
    (V, T, d) block of the Jacobian. torch.autograd.grad asks for X's gradient alone, so no
    weight gradient is computed (or left in the parameters' .grad).
    """
    idx = validation.token_sequence(model, idx)  # int64 ids
    T, V = idx.shape[0], model.config.V
    with torch.no_grad():
        X = model.embed(idx).requires_grad_(True)  # X^(0), (T, d)
    Z = model.forward_from_embeddings(X.unsqueeze(0)).squeeze(0)  # (T, V)
    rows = []
    for t in range(T):
        units = Z.new_zeros(V, T, V)  # (V, T, V): vector v is e_v at row t
        units[:, t] = torch.eye(V)
        (grad,) = torch.autograd.grad(Z, X, units, retain_graph=True, is_grads_batched=True)  # (V, T, d): dZ_{t,v} / dX
        rows.append(grad.pow(2).sum(dim=(0, 2)).sqrt())  # (T,): norm over v and the d coordinates
    return torch.stack(rows)  # (T, T): [t, s]


def future_dependence(dependency_map: torch.Tensor) -> float:
    """Largest entry strictly above the diagonal (Z_t's dependence on some x_s with s > t); 0.0 if causal."""
    return dependency_map.triu(diagonal=1).max().item()


def weakest_present_dependence(dependency_map: torch.Tensor) -> float:
    """Smallest entry on or below the diagonal: > 0 means Z_t does depend on every x_s with s <= t."""
    T = dependency_map.shape[0]
    lower = torch.ones(T, T, dtype=torch.bool).tril()
    return dependency_map[lower].min().item()
