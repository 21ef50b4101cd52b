"""How a checker runs: the decorator that turns its outcome into a Result, and the guard around every
call of the learner's code, so a learner's mistake never raises.

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
import copy
import functools
import os
import sysconfig
import traceback

import torch

from . import result
from .mistakes import Mistake, named_mistakes
from .result import ERROR, FAILED, NOT_ATTEMPTED, PASSED, Result


class Wrong(Exception):
    """Raised inside a checker body: the answer is rejected with this message and details.

    mistake: the stable identifier (mistake_ids.py) of what the message names, which every raise states; a
    message that is itself a Mistake brings its own instead. None only where the message comes from a
    mistake table or a sealed record, whose identifiers name_mistake or note_ids has noted already (none
    when nothing explains the answer: the class report's "failed, no mistake named").
    tests/test_exercises_mistake_ids.py reads every raise in gptlib/exercises and holds it to this.
    """

    def __init__(self, message: str, details: list[str] | tuple[str, ...] = (), *, mistake: str | None):
        super().__init__(message)
        self.message, self.details = message, tuple(details)
        self.mistake = message.id if isinstance(message, Mistake) else mistake


class NotAttempted(Exception):
    """Raised by `call` (and `not_attempted`): the learner's answer is still the scaffold's stub or placeholder."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def not_attempted(message: str):
    """Raise inside a checker body when the answer is still the scaffold's placeholder (e.g. None)."""
    raise NotAttempted(message)


class LearnerRaised(Exception):
    """Raised by `call`: the learner's code raised `error`; `what` names the call (the function and its arguments)."""

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
        raise Wrong(f"expected a function (or model) to call, got {type(fn).__name__} {fn!r:.60}", mistake="not-callable")
    copies = list(args) if in_place else [learner_copy(arg) for arg in args]
    try:
        with global_state_kept():
            return fn(*copies)
    except NotImplementedError as error:
        if raised_by_a_stub(error):
            raise NotAttempted(f"{what} still raises NotImplementedError: replace the stub's body with your own code.") from None
        raise LearnerRaised(what, error) from None
    except Exception as error:  # the learner's mistake, reported, never raised
        raise LearnerRaised(what, error) from None


def checker(exercise: str):
    """Decorate a check body (see the module docstring) so that it always returns a Result, runs
    in a known global state (grad mode on, float32 default) and leaves that state as it found it."""

    def decorate(body):
        @functools.wraps(body)
        def run(*args, **kwargs) -> Result:
            try:
                with global_state_kept(), torch.inference_mode(False), torch.enable_grad(), named_mistakes() as named:
                    torch.set_default_dtype(torch.float32)
                    message, details = body(*args, **kwargs)
            except Wrong as wrong:
                own = [wrong.mistake] if wrong.mistake else []
                return Result(exercise, FAILED, wrong.message, wrong.details, mistakes=tuple(dict.fromkeys(named + own)))
            except NotAttempted as stub:
                return Result(exercise, NOT_ATTEMPTED, stub.message)
            except LearnerRaised as raised:
                error = raised.error
                return Result(exercise, ERROR, f"{raised.what} raised {type(error).__name__}: {error}")
            except Exception as error:  # an answer of a shape the checker could not use
                return Result(exercise, ERROR, f"the checker could not use your answer: {type(error).__name__}: {error}")
            result.PASSED_IN_KERNEL.add(body.__name__)  # read through the module: a test may replace the set
            return Result(exercise, PASSED, message, tuple(details))

        return run

    return decorate
