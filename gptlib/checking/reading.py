"""Reading a learner's answer: a count, a number, a fixed-length tuple or a tensor, whatever form it
came in (Python, numpy, a one-element tensor), or a Wrong verdict saying what was expected.

Not gptlib.validation: that one checks gptlib's own inputs and raises ValueError; these read a
learner's answer leniently (a whole float is a count) and reject it as a verdict, never an exception.
"""

from __future__ import annotations

import numbers

import numpy as np
import torch

from .running import Wrong


def _scalar(value):
    """A one-element tensor or numpy array as its Python number; anything else unchanged."""
    if isinstance(value, torch.Tensor) and value.numel() == 1 or isinstance(value, np.ndarray) and value.size == 1:
        return value.item()
    return value


def as_int(value, what: str) -> int:
    """A learner's count as an int: ints, whole floats, and one-element tensors or numpy values of them."""
    value = _scalar(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise Wrong(f"{what} should be a whole number, got {type(value).__name__} {value!r:.60}",
                    mistake="answer-not-a-whole-number")
    if isinstance(value, numbers.Integral):
        return int(value)
    if value != value or value in (float("inf"), float("-inf")) or value != int(value):
        raise Wrong(f"{what} should be a whole number, got {value!r}", mistake="answer-fraction")
    return int(value)


def as_float(value, what: str) -> float:
    """A learner's number as a float (Python, numpy, or a one-element tensor or array)."""
    value = _scalar(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise Wrong(f"{what} should be a number, got {type(value).__name__} {value!r:.60}", mistake="answer-not-a-number")
    return float(value)


def as_numbers(value, names: tuple[str, ...], what: str) -> list:
    """A learner's fixed-length answer (one number per name) as a list of its items, from a tuple,
    list, 1-d tensor or 1-d numpy array. Each item is then read with as_int or as_float."""
    if isinstance(value, (torch.Tensor, np.ndarray)) and value.ndim == 1:
        value = list(value)
    if not isinstance(value, (tuple, list)) or len(value) != len(names):
        raise Wrong(f"expected {what}: {len(names)} numbers ({', '.join(names)}), got {value!r:.60}",
                    mistake="answer-not-a-tuple")
    return list(value)


def as_matrix(value, shape: tuple[int, ...], what: str) -> torch.Tensor:
    """A learner's tensor (torch or numpy), checked for type and shape, as float64 for comparison."""
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":  # booleans too (a map of True/False)
        value = torch.from_numpy(value)
    if not isinstance(value, torch.Tensor):
        raise Wrong(f"{what} should be a torch.Tensor (or numpy array) of shape {shape}, got {type(value).__name__}",
                    mistake="answer-not-a-matrix")
    if tuple(value.shape) != tuple(shape):
        raise Wrong(f"{what} should have shape {tuple(shape)}, got {tuple(value.shape)}", mistake="answer-shape")
    return value.detach().to(torch.float64)
