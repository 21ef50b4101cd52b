"""A submission's values as plain data the judge reads: builtins of their exact types, tensors, nothing else.

Everything the submission's process sends the judge goes through here (zygote.py's replies, remote_module.py's
parameter values), so that what crosses is data, never an object whose methods the submission wrote.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import torch


def plain_tensor(value: torch.Tensor) -> torch.Tensor:
    """A copy of a tensor as a plain torch.Tensor, detached: no subclass, no autograd history, no shared storage."""
    return torch.Tensor.detach(value).as_subclass(torch.Tensor).clone()


def plain(value, depth: int = 0):
    """value as plain data the judge reads: each builtin as its exact type, read through the builtin's
    own methods so that an override cannot lie (an int subclass or IntEnum becomes its int, a
    namedtuple its tuple), numpy arrays as tensors, numpy numbers as Python ones, other numbers
    (Fraction, Decimal) as the built-in one the checkers read; anything else raises."""
    kind = type(value)  # not value.__class__, which an object may fake
    if depth > 32:
        raise TypeError("nested more than 32 deep")
    if value is None or kind is bool:
        return value
    for base in (int, float, complex, str):
        if issubclass(kind, base):
            return getattr(base, f"__{base.__name__}__")(value)
    if issubclass(kind, (tuple, list)):
        base = tuple if issubclass(kind, tuple) else list
        return base(plain(v, depth + 1) for v in base.__iter__(value))
    if issubclass(kind, dict):
        return {plain(k, depth + 1): plain(v, depth + 1) for k, v in dict.items(value)}
    if issubclass(kind, torch.Tensor):
        return plain_tensor(value)
    if issubclass(kind, np.ndarray):
        return torch.from_numpy(np.array(value, copy=True))
    if issubclass(kind, np.generic):
        return plain(value.item(), depth + 1)
    if isinstance(value, numbers.Number):  # a Fraction, a Decimal: as the built-in number it equals
        return plain(_number(value), depth + 1)
    raise TypeError(kind.__name__)


def _number(value: numbers.Number):
    """A number of no built-in type (Fraction, Decimal) as the built-in one the
    checkers read it as: a whole value as int (exactly), else float or complex."""
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        number = float(value)
        return int(value) if math.isfinite(number) and value == int(value) else number
    return complex(value)
