"""What every checker returns: a Result, the verdict (`passed`, `failed`, `not attempted yet`, `error`)
with a message naming the typical mistake it recognised, printed as a short verdict in a notebook.

How a checker runs and keeps a learner's mistake from raising: running.py. Reading a
learner's answer: reading.py. Naming a mistake: mistakes.py. Hidden variants' seeds: variants.py.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

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
    mistakes: tuple[str, ...] = ()  # identifiers of the typical mistakes a failed check named (checking/mistakes.py)

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
