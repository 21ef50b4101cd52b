"""Stable identifiers of the typical mistakes the checkers name, and which ones a check named.

A checker keeps each typical mistake as `Mistake("eps-outside-root", "your eps sits outside the square
root: ...")`: a str (the message the learner reads, unchanged) that also carries a short identifier.
Messages may be reworded from one term to the next; the identifier stays, so a class report
(gptlib_course/report.py) counts one mistake once whatever its wording, and compares terms.

`mistakes.name_mistake` notes the identifiers of the mistakes it names (candidates and pairs included)
while a checker runs (`recording`), and a concept question's check those its sealed record names; every
other rejection states its own, `Wrong(message, mistake="logits-shape")` (checking.Wrong). A failed Result
carries them as `Result.mistakes` (a report such as check_own_model's, those of its parts), and the grader
stores them in each student's results. tests/checking/test_mistake_ids.py walks the sources: every
identifier is declared once across all checkers, and every Wrong raised states one (None only where a
mistake table or sealed record names the mistake, or nothing explains the answer).
"""

from __future__ import annotations

import contextlib
import contextvars
import re

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
    back from its sealed record (exercises/sealed.py), whose Mistake objects a class release does not hold."""
    named = _NAMED.get()
    for i in ids if named is not None else ():
        if i not in named:
            named.append(i)


@contextlib.contextmanager
def recording():
    """Within the block (this thread or task), the identifiers `note` and `note_ids` receive, in order, each once."""
    named: list[str] = []
    token = _NAMED.set(named)
    try:
        yield named
    finally:
        _NAMED.reset(token)
