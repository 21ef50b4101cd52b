"""What every checker returns, and the plumbing that keeps a learner's mistake from raising.

A checker is a function decorated with `checker("Exercise N")`. Its body calls the learner's
code through `call(...)`, returns `(message, details)` when everything agrees, and raises
`Wrong(message, details)` to reject. The decorator turns each outcome into a `Result`, whose
truth value is the verdict (`assert exercises.check_...(...)` fails on a wrong answer):

    passed              the body returned
    failed              the body raised Wrong (the message names the mistake it recognised)
    not attempted yet   the learner's own code raised NotImplementedError (the scaffold's stub)
    error               the learner's code raised anything else (a NotImplementedError from torch
                        included), or returned something the checker could not use: reported with
                        the exception's type and message

What the learner's code can and cannot disturb:
- The body runs with grad mode on, float32 as the default dtype and the caller's random generator
  forked, whatever the notebook set before; all of it is as the caller left it afterwards.
- `call` hands the learner's function copies of its arguments (tensors, modules, configs), so
  nothing it does to them reaches the checker's references (unless changing them in place is the
  task: in_place=True), and it restores the default dtype,
  grad mode and random generator after each call, so a learner's global change cannot reach the
  checker's own measurements either.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import functools
import html
import itertools
import numbers
import operator
import os
import random
import sysconfig
import traceback
from dataclasses import dataclass

import numpy as np
import torch

from .mistake_ids import Mistake, note, recording

PASSED, FAILED, NOT_ATTEMPTED, ERROR = "passed", "failed", "not attempted yet", "error"
_MARKS = {PASSED: "✔", FAILED: "✘", NOT_ATTEMPTED: "…", ERROR: "⚠"}
_COLOURS = {PASSED: "#2e7d32", FAILED: "#c62828", NOT_ATTEMPTED: "#757575", ERROR: "#ef6c00"}
PASSED_IN_KERNEL: set[str] = set()  # names of the checkers passed in this process (exercises.progress reads it)


@dataclass(frozen=True)
class Result:
    """A verdict: `passed` for tests, a short readable text for people (repr and HTML)."""

    exercise: str  # "Exercise 1 ★", "Your own GPT", ...
    status: str  # one of PASSED, FAILED, NOT_ATTEMPTED, ERROR
    message: str
    details: tuple[str, ...] = ()
    parts: tuple["Result", ...] = ()  # sub-verdicts of a report (check_own_model)
    mistakes: tuple[str, ...] = ()  # identifiers of the typical mistakes a failed check named (mistake_ids.py)

    @property
    def passed(self) -> bool:
        return self.status == PASSED

    def __bool__(self) -> bool:
        return self.passed

    def lines(self) -> list[str]:
        lines = [f"{_MARKS[self.status]} {self.exercise}: {self.status}. {self.message}"]
        lines += [f"    {detail}" for detail in self.details]
        for part in self.parts:
            lines += ["  " + line for line in part.lines()]
        return lines

    def __repr__(self) -> str:
        return "\n".join(self.lines())

    __str__ = __repr__

    def _repr_html_(self) -> str:
        colour = _COLOURS[self.status]
        text = html.escape(repr(self))
        return f'<pre style="border-left: 4px solid {colour}; padding-left: 8px; white-space: pre-wrap">{text}</pre>'


class Wrong(Exception):
    """Raised inside a checker body: the answer is rejected with this message and details."""

    def __init__(self, message: str, details: list[str] | tuple[str, ...] = ()):
        super().__init__(message)
        self.message, self.details = message, tuple(details)


class _NotAttempted(Exception):
    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def not_attempted(message: str):
    """Raise inside a checker body when the answer is still the scaffold's placeholder (e.g. None)."""
    raise _NotAttempted(message)


_VARIANT = contextvars.ContextVar("gptlib_exercises_variant", default=0)
_SEED_RANGE = 2**63  # what torch.manual_seed and random.Random accept


def variant_seed(seed: int) -> int:
    """The seed a checker draws its random configurations, inputs and weights from: `seed` itself,
    or inside `hidden_variant(offset)` seed + offset, so the same checker asks at other points. A
    checker passes every seed it uses through this; nothing global (torch.manual_seed, random) is replaced."""
    return (seed + _VARIANT.get()) % _SEED_RANGE


def variant_points(points: tuple, draw) -> tuple:
    """The points a checker asks at: its own fixed `points`, or inside `hidden_variant(offset)` the
    points `draw(random.Random(offset))` returns, other points of the same kind."""
    offset = _VARIANT.get()
    return tuple(points) if offset == 0 else tuple(draw(random.Random(offset)))


@contextlib.contextmanager
def hidden_variant(offset: int):
    """Within the block (this thread or task only) every checker draws from its seeds moved by `offset`."""
    token = _VARIANT.set(offset)
    try:
        yield
    finally:
        _VARIANT.reset(token)


class _LearnerRaised(Exception):
    def __init__(self, what: str, error: Exception):
        super().__init__(what)
        self.what, self.error = what, error


# Where a NotImplementedError is a library's (torch, numpy, the standard library, gptlib), not a stub's.
_LIBRARIES = tuple(
    os.path.realpath(path) + os.sep
    for path in {*(sysconfig.get_paths()[key] for key in ("stdlib", "purelib", "platlib")),
                 os.path.dirname(os.path.dirname(__file__))}
)


def raised_by_a_stub(error: NotImplementedError) -> bool:
    """Whether a `raise` statement in the learner's own code raised it (the scaffold's stub), rather
    than a library the learner called (torch.func.jacfwd through a fused kernel, say)."""
    innermost = traceback.extract_tb(error.__traceback__)[-1]
    if innermost.filename.startswith("<frozen") or os.path.realpath(innermost.filename).startswith(_LIBRARIES):
        return False
    return (innermost.line or "raise").lstrip().startswith("raise")  # a C function called from the learner's line: not a stub


def learner_copy(value):
    """What the learner's code receives in place of a checker's argument: a copy it may change freely."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone().requires_grad_(value.requires_grad)
    return copy.deepcopy(value)


@contextlib.contextmanager
def global_state_kept():
    """Restore the default dtype, grad mode and torch's random generator on exit, whatever ran inside."""
    dtype, grad = torch.get_default_dtype(), torch.is_grad_enabled()
    try:
        with torch.random.fork_rng(devices=[]):
            yield
    finally:
        torch.set_default_dtype(dtype)
        torch.set_grad_enabled(grad)


def call(fn, *args, what: str = "...", in_place: bool = False):
    """fn(*copies of args), with the stub's NotImplementedError read as 'not attempted' and any other
    exception reported as the learner's, named by the function's own name and `what` (its arguments).
    Global state fn changes (default dtype, grad mode, random generator) is restored after it.
    in_place=True: fn's task is to change its arguments (an init of the learner's own model), so it
    gets them themselves, not copies."""
    name = getattr(fn, "__name__", "your model")
    what = f"{'your function' if name == '<lambda>' else name}({what})"
    if not callable(fn):
        raise Wrong(f"expected a function (or model) to call, got {type(fn).__name__} {fn!r:.60}")
    copies = list(args) if in_place else [learner_copy(arg) for arg in args]
    try:
        with global_state_kept():
            return fn(*copies)
    except NotImplementedError as error:
        if raised_by_a_stub(error):
            raise _NotAttempted(f"{what} still raises NotImplementedError: replace the stub's body with your own code.") from None
        raise _LearnerRaised(what, error) from None
    except Exception as error:  # the learner's mistake, reported, never raised
        raise _LearnerRaised(what, error) from None


def checker(exercise: str):
    """Decorate a check body (see the module docstring) so that it always returns a Result, runs
    in a known global state (grad mode on, float32 default) and leaves that state as it found it."""

    def decorate(body):
        @functools.wraps(body)
        def run(*args, **kwargs) -> Result:
            try:
                with global_state_kept(), torch.inference_mode(False), torch.enable_grad(), recording() as named:
                    torch.set_default_dtype(torch.float32)
                    message, details = body(*args, **kwargs)
            except Wrong as wrong:
                own = [wrong.message.id] if isinstance(wrong.message, Mistake) else []  # a Mistake raised as it is
                return Result(exercise, FAILED, wrong.message, wrong.details, mistakes=tuple(dict.fromkeys(named + own)))
            except _NotAttempted as stub:
                return Result(exercise, NOT_ATTEMPTED, stub.message)
            except _LearnerRaised as raised:
                error = raised.error
                return Result(exercise, ERROR, f"{raised.what} raised {type(error).__name__}: {error}")
            except Exception as error:  # an answer of a shape the checker could not use
                return Result(exercise, ERROR, f"the checker could not use your answer: {type(error).__name__}: {error}")
            PASSED_IN_KERNEL.add(body.__name__)
            return Result(exercise, PASSED, message, tuple(details))

        return run

    return decorate


def _scalar(value):
    """A one-element tensor or numpy array as its Python number; anything else unchanged."""
    if isinstance(value, torch.Tensor) and value.numel() == 1 or isinstance(value, np.ndarray) and value.size == 1:
        return value.item()
    return value


def as_int(value, what: str) -> int:
    """A learner's count as an int: ints, whole floats, and one-element tensors or numpy values of them."""
    value = _scalar(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise Wrong(f"{what} should be a whole number, got {type(value).__name__} {value!r:.60}")
    if isinstance(value, numbers.Integral):
        return int(value)
    if value != value or value in (float("inf"), float("-inf")) or value != int(value):
        raise Wrong(f"{what} should be a whole number, got {value!r}")
    return int(value)


def as_float(value, what: str) -> float:
    """A learner's number as a float (Python, numpy, or a one-element tensor or array)."""
    value = _scalar(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise Wrong(f"{what} should be a number, got {type(value).__name__} {value!r:.60}")
    return float(value)


def as_numbers(value, names: tuple[str, ...], what: str) -> list:
    """A learner's fixed-length answer (one number per name) as a list of its items, from a tuple,
    list, 1-d tensor or 1-d numpy array. Each item is then read with as_int or as_float."""
    if isinstance(value, (torch.Tensor, np.ndarray)) and value.ndim == 1:
        value = list(value)
    if not isinstance(value, (tuple, list)) or len(value) != len(names):
        raise Wrong(f"expected {what}: {len(names)} numbers ({', '.join(names)}), got {value!r:.60}")
    return list(value)


def as_matrix(value, shape: tuple[int, ...], what: str) -> torch.Tensor:
    """A learner's tensor (torch or numpy), checked for type and shape, as float64 for comparison."""
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":  # booleans too (a map of True/False)
        value = torch.from_numpy(value)
    if not isinstance(value, torch.Tensor):
        raise Wrong(f"{what} should be a torch.Tensor (or numpy array) of shape {shape}, got {type(value).__name__}")
    if tuple(value.shape) != tuple(shape):
        raise Wrong(f"{what} should have shape {tuple(shape)}, got {tuple(value.shape)}")
    return value.detach().to(torch.float64)


def close(got, expected, rtol: float = 0.0, atol: float = 0.0, of_largest: bool = False) -> bool:
    """Whether a learner's answer equals `expected` within atol + rtol |expected|, entry by entry
    (exactly, with the default tolerances): numbers, tensors of the same shape (compared in
    float64, whatever their dtype), and tuples or lists of them. The one tolerance rule of the checkers.
    of_largest=True: rtol scales the largest |entry| of each expected tensor instead of each entry's
    own (float rounding in a module's output grows with its largest values, not with each entry)."""
    if isinstance(got, (tuple, list)) or isinstance(expected, (tuple, list)):
        return (isinstance(got, (tuple, list)) and isinstance(expected, (tuple, list)) and len(got) == len(expected)
                and all(close(g, e, rtol, atol, of_largest) for g, e in zip(got, expected)))
    if isinstance(got, torch.Tensor) or isinstance(expected, torch.Tensor):
        got, expected = (torch.as_tensor(x).detach().to(torch.float64) for x in (got, expected))
        if of_largest and expected.numel():
            rtol, atol = 0.0, atol + rtol * expected.abs().max().item()
        return got.shape == expected.shape and torch.allclose(got, expected, rtol=rtol, atol=atol)
    return abs(got - expected) <= atol + rtol * abs(expected)


def explaining(answers: dict, mistakes: dict, same=close, size: int = 1) -> list[tuple[str, ...]]:
    """Every combination of `size` mistakes whose predictions, added up, explain the learner's answer at
    EVERY point, in the order of `mistakes` (size 1: the single mistakes; size 0: () when the answer is 0).

    answers: {point: the learner's answer there}, a point being what the learner's function was
    called with (one argument, or a tuple of several). mistakes: {name: a function of the same
    argument(s) giving the answer that mistake produces}. same(answer, predicted) is the tolerance.
    """
    calls = [(point if isinstance(point, tuple) else (point,), answer) for point, answer in answers.items()]
    return [names for names in itertools.combinations(mistakes, size)
            if all(same(answer, _added([mistakes[name](*args) for name in names])) for args, answer in calls)]


def _added(predictions: list):
    """The predictions' sum (one prediction as it is, none as 0)."""
    return functools.reduce(operator.add, predictions) if predictions else 0


def name_mistake(answers: dict, mistakes: dict, same=close, pairs: bool = False) -> str | None:
    """Name the typical mistake behind a wrong answer, from what it does, or None when none explains it.

    answers, mistakes and same as for `explaining`. A mistake is named only if it explains the answer
    at EVERY point; with pairs=True (answers that add up, such as counts) also a sum of two mistakes,
    "A and B". When several explain it equally, the points tried cannot tell them apart: all are
    listed, as candidates.
    """
    names = [name for (name,) in explaining(answers, mistakes, same)]
    note(*names)
    if not names and pairs:
        twos = explaining(answers, mistakes, same, size=2)
        note(*(name for two in twos for name in two))
        found = [f"{a} and {b}" for a, b in twos]
        if len(found) == 1:
            return f"exactly what two mistakes together give: {found[0]}"
        names = [f"({pair})" for pair in found]
    if len(names) > 1:
        shown = "; or ".join(names[:_CANDIDATES]) + (f"; or {len(names) - _CANDIDATES} more" if len(names) > _CANDIDATES else "")
        return f"your answer is what each of {len(names)} typical mistakes gives, and the points tried cannot tell which: {shown}"
    return names[0] if names else None


def scale_of(got: torch.Tensor, expected: torch.Tensor, rtol: float, atol: float) -> float | None:
    """s when got = s * expected within the tolerances (close), else None: a stray scale factor, measured."""
    s = ((got * expected).sum() / (expected * expected).sum()).item()
    return s if close(got, s * expected, rtol, atol) else None


_CANDIDATES = 4  # candidates listed by name_mistake before it only counts the rest
