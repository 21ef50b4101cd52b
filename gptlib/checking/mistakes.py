"""Typical mistakes: their stable identifiers, naming the one behind a wrong answer from what it does at
every point tried, and which ones a check named.

A checker keeps each typical mistake as `Mistake("eps-outside-root", "your eps sits outside the square
root: ...")`: a str (the message the learner reads, unchanged) that also carries a short identifier.
Messages may be reworded from one term to the next; the identifier stays, so a class report
(gptlib_course/report.py) counts one mistake once whatever its wording, and compares terms.

`name_mistake` compares a learner's answers with each mistake's predictions (`close`, the one tolerance
rule of the checkers) and notes the identifiers of the mistakes it names (candidates and pairs included)
while a checker runs (`named_mistakes`), and a concept question's check notes those its sealed record
names; every other rejection states its own, `Wrong(message, mistake="logits-shape")` (running.Wrong). A
failed Result carries them as `Result.mistakes` (a report such as check_own_model's, those of its parts),
and the grader stores them in each student's results. tests/checking/test_mistake_ids.py walks the sources:
every identifier is declared once across all checkers, and every Wrong raised states one (None only where a
mistake table or sealed record names the mistake, or nothing explains the answer).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import itertools
import operator
import re

import torch

ID = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*\Z")  # lower-case words joined by hyphens: "mask-off-by-one"


class Mistake(str):
    """A typical mistake's message (the str itself, what the learner reads) with its stable identifier `id`."""

    id: str

    def __new__(cls, id: str, message: str):
        if not isinstance(id, str) or not ID.match(id):
            raise ValueError(f"a mistake's id must be lower-case words joined by hyphens, got {id!r}")
        made = super().__new__(cls, message)
        made.id = id
        return made

    def __getnewargs__(self):
        return self.id, str(self)

    def __add__(self, more: str) -> Mistake:
        """The message continued (a closing "." or a hint), the same mistake: it keeps its identifier."""
        return type(self)(self.id, str(self) + more)


_NAMED: contextvars.ContextVar[list | None] = contextvars.ContextVar("gptlib_named_mistakes", default=None)


def note(*names) -> None:
    """Note the identifiers of the named mistakes (those that carry one) in the check running now, if any."""
    note_ids(*(name.id for name in names if isinstance(name, Mistake)))


def note_ids(*ids: str) -> None:
    """Note these identifiers in the check running now, if any, each once: a concept question's check reads them
    back from its sealed record (checking/sealed.py), whose Mistake objects a class release does not hold."""
    named = _NAMED.get()
    for i in ids if named is not None else ():
        if i not in named:
            named.append(i)


@contextlib.contextmanager
def named_mistakes():
    """Within the block (this thread or task), the identifiers `note` and `note_ids` receive, in order, each once."""
    named: list[str] = []
    token = _NAMED.set(named)
    try:
        yield named
    finally:
        _NAMED.reset(token)


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
