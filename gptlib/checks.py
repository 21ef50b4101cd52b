"""Input checks shared by the analysis modules: one per kind of input, each raising one
ValueError that states the rule. (Token ids for a model: GPT.check_tokens.)"""

from __future__ import annotations

import torch


def _shape(x) -> object:
    return tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__


def check_rows(u: torch.Tensor, name: str = "u") -> None:
    """u: floating-point rows (..., d) with d >= 1, e.g. LayerNorm inputs."""
    if not isinstance(u, torch.Tensor) or not u.dtype.is_floating_point:
        raise ValueError(f"{name} must be a floating-point torch.Tensor")
    if u.dim() == 0 or u.shape[-1] < 1:
        raise ValueError(f"{name} must have a last (feature) dimension d >= 1, got shape {tuple(u.shape)}")


def check_batch(X: torch.Tensor, d: int | None = None) -> None:
    """X: a batch of residual-stream sequences (B, T, d), of width d when d is given."""
    if not isinstance(X, torch.Tensor) or X.dim() != 3 or (d is not None and X.shape[-1] != d):
        width = "" if d is None else f" with d={d}"
        raise ValueError(f"X must be a (B, T, d) tensor{width}, got {_shape(X)}")


def check_sequence(X: torch.Tensor, d: int) -> None:
    """X: one residual-stream sequence (T, d) of width d."""
    if not isinstance(X, torch.Tensor) or X.dim() != 2 or X.shape[1] != d:
        raise ValueError(f"X must be one sequence of shape (T, d) with d = {d}, got {_shape(X)}")


def check_token_sequence(model, idx: torch.Tensor) -> None:
    """idx: one sequence of token ids (T,) that `model` accepts (GPT.check_tokens)."""
    model.check_tokens(idx)
    if idx.dim() != 1:
        raise ValueError(f"idx must be one sequence of token ids (T,), got shape {tuple(idx.shape)}")
