"""The rules an input must meet, one function per kind of input, each raising one ValueError
that names the input and the rule it breaks.

One scheme: each function is named after the kind of input it takes (integer, real, boolean, seed,
token_ids, token_sequence, positions, tensor_of_shape, rows, batch, sequence, finite_weights) and
returns that input in its checked form, so every call reads `value = validation.kind(...)`. Numbers come
back as a plain Python int, float or bool, token ids and positions as an int64 tensor, other tensors
and models as they were. GPTConfig, TrainSettings, GPT, sampling, encode/decode and the analysis
modules call them, so every rule is written once.
"""

from __future__ import annotations

import math
import numbers
import operator

import torch


def integer(name: str, value, *, at_least: int | None = None, at_most: int | None = None) -> int:
    """value as a Python int in [at_least, at_most]; bools, floats (even 3.0) and strings are refused."""
    rule = f"{name} must be an integer" + _bounds(at_least, at_most)
    if isinstance(value, bool):
        raise ValueError(f"{rule}, got {value!r}")
    try:
        value = operator.index(value)  # int, numpy integers, 0-d integer tensors
    except TypeError:
        raise ValueError(f"{rule}, got {value!r}") from None
    if (at_least is not None and value < at_least) or (at_most is not None and value > at_most):
        raise ValueError(f"{rule}, got {value}")
    return value


def real(name: str, value, *, above: float | None = None, at_least: float | None = None,
         at_most: float | None = None) -> float:
    """value as a finite Python float with value > above, value >= at_least, value <= at_most.

    NaN and infinities are refused; -0.0 comes back as 0.0.
    """
    lower = f" > {above}" if above is not None else ""
    rule = f"{name} must be a finite number" + lower + _bounds(at_least, at_most, joiner=" and " if lower else " ")
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{rule}, got {value!r}")
    value = float(value) + 0.0  # numpy floats and Fractions become floats; -0.0 becomes 0.0
    if not math.isfinite(value) or (above is not None and not value > above) \
            or (at_least is not None and value < at_least) or (at_most is not None and value > at_most):
        raise ValueError(f"{rule}, got {value!r}")
    return value


def seed(name: str, value) -> int:
    """value as a seed for torch's generators: an integer in [0, 2^64 - 1], torch's seed range."""
    return integer(name, value, at_least=0, at_most=2**64 - 1)


def boolean(name: str, value) -> bool:
    """value itself when it is True or False; a string such as "False" is refused, not read as truthy."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return value


def _bounds(at_least, at_most, joiner: str = " ") -> str:
    if at_least is not None and at_most is not None:
        return f"{joiner}in [{at_least}, {at_most}]"
    if at_least is not None:
        return f"{joiner}>= {at_least}"
    if at_most is not None:
        return f"{joiner}<= {at_most}"
    return ""


def token_ids(ids, V: int, *, T_max: int | None = None, dims: tuple[int, ...] = (1, 2),
              allow_empty: bool = False, name: str = "token ids", bound: str = "V") -> torch.Tensor:
    """ids as an int64 tensor after checking every rule token ids meet in gptlib.

    A torch.Tensor (lists and arrays are refused: build one with torch.tensor or gptlib.encode)
    of any integer dtype, uint8 to int64, computed with as int64 (bool is refused: indexing
    with it would select by mask, not by id); dim in `dims`, 1-D (T,) or 2-D (B, T); at least
    one sequence of at least one token unless allow_empty; T <= T_max when T_max is given;
    every id in [0, V), the bound named `bound` in messages (positions(): "T").
    """
    if not isinstance(ids, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor of integers (see gptlib.encode), got {type(ids).__name__}")
    if ids.dtype == torch.bool or ids.dtype.is_floating_point or ids.dtype.is_complex:
        raise ValueError(f"{name} must have an integer dtype, got {ids.dtype}")
    if ids.layout != torch.strided or ids.is_meta:
        raise ValueError(f"{name} must be a dense tensor holding values, got layout {ids.layout} on {ids.device}")
    if ids.dim() not in dims:
        shapes = " or ".join({1: "1-D (T,)", 2: "2-D (B, T)"}[k] for k in dims)
        raise ValueError(f"{name} must be {shapes}, got shape {tuple(ids.shape)}")
    if ids.numel() == 0 and not allow_empty:
        raise ValueError(f"{name} must hold at least one sequence of at least one token, got shape {tuple(ids.shape)}")
    T = ids.shape[-1]
    if T_max is not None and T > T_max:
        raise ValueError(f"sequence length T must satisfy 1 <= T <= T_max={T_max}, got T={T}")
    wide = ids.to(torch.int64)  # a uint64 id >= 2**63 wraps to a negative one: refused below all the same
    low, high = (int(x) for x in torch.aminmax(wide)) if wide.numel() else (0, 0)  # one pass over the ids
    if low < 0 or high >= V:
        outside = ids[(wide < 0) | (wide >= V)]  # (N,) the offending ids, in their own dtype
        shown = ", ".join(str(i) for i in outside[:5].tolist())
        more = f" and {len(outside) - 5} more" if len(outside) > 5 else ""
        raise ValueError(f"{name} must lie in [0, {bound}) = [0, {V}), got {shown}{more}")
    return wide


def positions(p, T: int, name: str = "positions") -> torch.Tensor:
    """p as int64: a non-empty 1-D tensor of positions of a sequence of T tokens, each in [0, T)."""
    return token_ids(p, T, dims=(1,), name=name, bound="T")


def finite_weights(model: torch.nn.Module, name: str = "model") -> torch.nn.Module:
    """model itself, if every parameter holds values (not the meta device) that are all finite.

    A NaN or inf weight is refused, naming the parameter: the fused attention kernel and the explicit
    path (A^h formed) would not even agree on what such a model computes. One sum per parameter
    screens them all (a NaN or inf makes its sum one); only a non-finite sum, which a sum too large
    for its dtype also gives, is counted value by value.
    """
    weights = dict(model.named_parameters())
    for label, weight in weights.items():
        if weight.is_meta:
            raise ValueError(f"{name} must hold real weights, got {label} on the meta device")
    if not weights:
        return model
    with torch.no_grad():
        screened = torch.stack([weight.sum().float() for weight in weights.values()]).isfinite().tolist()
        for (label, weight), finite in zip(weights.items(), screened):
            bad = 0 if finite else weight.numel() - int(torch.isfinite(weight).sum())
            if bad:
                raise ValueError(f"{name}'s weights must be finite, got {bad} NaN or inf values in {label}")
    return model


def _shape(x) -> object:
    return tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__


def tensor_of_shape(x, shape: tuple[int, ...], name: str, symbols: str, what: str = "a tensor") -> torch.Tensor:
    """x: a torch.Tensor of exactly `shape`, which `symbols` spells in the lecture's letters."""
    if not isinstance(x, torch.Tensor) or tuple(x.shape) != shape:
        raise ValueError(f"{name} must be {what} of shape {symbols} = {shape}, got {_shape(x)}")
    return x


def rows(u: torch.Tensor, name: str = "u") -> torch.Tensor:
    """u: floating-point rows (..., d) with d >= 1, e.g. LayerNorm inputs."""
    if not isinstance(u, torch.Tensor) or not u.dtype.is_floating_point:
        raise ValueError(f"{name} must be a floating-point torch.Tensor")
    if u.dim() == 0 or u.shape[-1] < 1:
        raise ValueError(f"{name} must have a last (feature) dimension d >= 1, got shape {tuple(u.shape)}")
    return u


def batch(X: torch.Tensor, d: int | None = None) -> torch.Tensor:
    """X: a batch of residual-stream sequences (B, T, d), of width d when d is given."""
    if not isinstance(X, torch.Tensor) or X.dim() != 3 or (d is not None and X.shape[-1] != d):
        width = "" if d is None else f" with d={d}"
        raise ValueError(f"X must be a (B, T, d) tensor{width}, got {_shape(X)}")
    return X


def sequence(X: torch.Tensor, d: int) -> torch.Tensor:
    """X: one residual-stream sequence (T, d) of width d."""
    if not isinstance(X, torch.Tensor) or X.dim() != 2 or X.shape[1] != d:
        raise ValueError(f"X must be one sequence of shape (T, d) with d = {d}, got {_shape(X)}")
    return X


def token_sequence(model, idx: torch.Tensor) -> torch.Tensor:
    """idx as int64 ids: one sequence of token ids (T,) that `model` accepts (token_ids with dims=(1,))."""
    return token_ids(idx, model.config.V, T_max=model.config.T_max, dims=(1,), name="idx (one sequence of token ids)")
