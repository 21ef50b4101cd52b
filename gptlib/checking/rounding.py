"""Telling float rounding from a real difference, by a decision that rounding cannot cross.

A checker that compares two runs of a learner's model (or the learner's output with a reference)
must say whether they differ. In float32 a correct model's runs can differ by rounding, and a model
with large activations (weights of std 1, many layers) amplifies that rounding until it is as large
as a small real difference: no float32 tolerance separates the two for every model. So a tolerance
is only ever applied to a gap measured where rounding is far below it:

    a gap of exactly 0          no difference (nothing rounded differently: nothing to confirm)
    any other gap, measured in  measured again on a float64 deep copy of the model (the learner's own
    float32 or lower precision  is never changed), where rounding is about 1e9 times smaller and a real
                                difference is as large as before; the float64 gap decides
    a float64 model             its own gap decides

Where no float64 copy can run (not an nn.Module, .double() refused, float32 logits from the copy,
a crash), the gap measured in the model's own dtype decides, as before, and a verdict that rests on
it says why it could not be confirmed.
"""

from __future__ import annotations

import contextlib
import copy
from dataclasses import dataclass

import torch
from torch import nn

from .running import LearnerRaised, Wrong

AGAIN = "in float64, on a copy of your model"


class _NoFloat64(Exception):
    """No float64 copy of the model could run: the message says why."""


@contextlib.contextmanager
def _default_float64():
    dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # tensors the model creates in its forward are float64 too
    try:
        yield
    finally:
        torch.set_default_dtype(dtype)


class Float64Copy:
    """A float64 deep copy of `model`, made on first need and shared by every comparison of one check.
    fresh(idx) is call(copy, idx) (the checker's own way of calling a model, e.g. causal.logits) in float64,
    with float64 as the default dtype; it raises _NoFloat64, saying why, where that cannot be done (and
    every later run then does too). run(idx) is fresh(idx) computed once per idx, for a model known to
    give the same logits for the same tokens."""

    def __init__(self, model, call):
        self.model, self.call, self._copy, self.why_not = model, call, None, None
        self.run = remembered(self.fresh)  # the copy runs the same tokens once: comparisons share its runs

    def _made(self) -> nn.Module:
        if self._copy is None and self.why_not is None:
            self.why_not = self._make()
        if self.why_not is not None:
            raise _NoFloat64(self.why_not)
        return self._copy

    def _make(self) -> str | None:
        if not isinstance(self.model, nn.Module):
            return f"your model is a {type(self.model).__name__}, not an nn.Module, so no float64 copy of it can be made"
        try:
            twin = copy.deepcopy(self.model)
            shared = {p.data_ptr() for p in self.model.parameters()} & {p.data_ptr() for p in twin.parameters()}
        except Exception as error:
            return f"copying your model raised {type(error).__name__}: {error}"
        if twin is self.model or shared:  # a __deepcopy__ of its own: .double() would change the learner's model
            return "a deep copy of your model shares its parameters, so it cannot be made float64 without changing yours"
        try:
            twin.double()
            twin.train(self.model.training)
        except Exception as error:
            return f".double() on a copy of your model raised {type(error).__name__}: {error}"
        self._copy = twin
        return None

    def fresh(self, idx: torch.Tensor) -> torch.Tensor:
        twin = self._made()
        try:
            with _default_float64():
                Z = self.call(twin, idx)
        except Wrong as wrong:
            self.why_not = f"a float64 copy of your model failed: {wrong.message}"
        except LearnerRaised as raised:
            self.why_not = f"a float64 copy of your model raised {type(raised.error).__name__}: {raised.error}"
        except Exception as error:  # a stub's NotImplementedError too: the copy, not the learner, failed
            self.why_not = f"a float64 copy of your model raised {type(error).__name__}: {error}"
        else:
            if isinstance(Z, torch.Tensor) and Z.dtype == torch.float64:
                return Z
            self.why_not = f"a float64 copy of your model returned {str(Z.dtype).removeprefix('torch.')} logits"
        self._copy = None
        raise _NoFloat64(self.why_not)


def remembered(run):
    """run(idx) for a model that gives the same logits for the same tokens (causal.refuse_randomness has
    checked that), computed once per distinct idx."""
    seen = {}

    def again(idx: torch.Tensor) -> torch.Tensor:
        key = (tuple(idx.shape), idx.numpy().tobytes())
        if key not in seen:
            seen[key] = run(idx)
        return seen[key]

    return again


@dataclass(frozen=True)
class Gap:
    """One comparison: the gaps measured in the model's own dtype, the same gaps in float64 where they were
    measured again, the tolerance, and why no float64 measurement was made where one was needed."""

    measured: torch.Tensor  # float64, any shape: one gap per thing compared
    tolerance: float
    again: torch.Tensor | None = None  # the same gaps on the float64 copy
    why_not: str | None = None

    @property
    def deciding(self) -> torch.Tensor:
        return self.again if self.again is not None else self.measured

    @property
    def beyond(self) -> bool:
        """Whether the comparison found a difference: some deciding gap above the tolerance."""
        return bool(self.deciding.numel()) and self.deciding.max().item() > self.tolerance

    def largest(self) -> tuple[int, ...]:
        """Where the largest deciding gap is."""
        return tuple(int(n) for n in torch.unravel_index(self.deciding.argmax(), self.deciding.shape))

    def said(self, where: tuple[int, ...] | None = None) -> str:
        """The gap at `where` (default: the largest), as measured: 'by 0.081 (0.079 in float64, on a copy of
        your model)', or with why it was not measured again."""
        where = self.largest() if where is None else where
        first = f"by {self.measured[where].item():.2g}"
        if self.again is not None:
            return f"{first} ({self.again[where].item():.2g} {AGAIN})"
        return first + (f" (not measured again in float64: {self.why_not})" if self.why_not else "")


def measured_gap(measure, run, exact: Float64Copy | None, tolerance: float, dtype: torch.dtype, *,
                 needed=torch.Tensor.any, measured: torch.Tensor | None = None, fresh: bool = False) -> Gap:
    """The gaps of one comparison. measure(run) -> a tensor of gaps, where run(idx) gives a model's logits:
    called with the model's own `run` (logits of `dtype`; or `measured` is what it gives, already known),
    then with the float64 copy's exact.run (exact.fresh with fresh=True: every call runs the copy) where
    needed(gaps): by default where any gap is not 0. Never when `dtype` is float64 already."""
    measured = (measure(run) if measured is None else measured).double()
    if dtype == torch.float64 or exact is None or not needed(measured):
        return Gap(measured, tolerance)
    try:
        again = measure(exact.fresh if fresh else exact.run).double()
    except _NoFloat64 as no:
        return Gap(measured, tolerance, why_not=str(no))
    return Gap(measured, tolerance, again=again)
