"""The student's half: `grader = Notebook("tests")`, then `grader.check("NAME")` in a notebook.

It runs the public cases of tests/NAME.py on the student's own kernel and shows what the checker
said. It never says "all tests passed": the hidden cases are not in the student's folder, and
the report says how many points they hold and that they run at grading.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from pathlib import Path

from .cases import TestFile, load


def _notebook_variables() -> dict:
    try:
        from IPython import get_ipython

        shell = get_ipython()
    except ImportError:
        shell = None
    import __main__

    return shell.user_ns if shell is not None else vars(__main__)


@dataclass(frozen=True)
class CheckReport:
    test: TestFile
    results: tuple  # the checker's Result for each public case

    def lines(self) -> list[str]:
        public = [c for c in self.test.cases if not c.hidden]
        earned = sum(c.points for c, r in zip(public, self.results) if r)
        lines = [line for r in self.results for line in r.lines()]
        lines.append(f"public tests of {self.test.name!r}: {earned:g} of {sum(c.points for c in public):g} points.")
        lines.append("Hidden tests run when your notebook is graded: passing the public tests does not promise them.")
        return lines

    def __bool__(self) -> bool:
        return all(self.results)

    def __repr__(self) -> str:
        return "\n".join(self.lines())

    def _repr_html_(self) -> str:
        parts = [r._repr_html_() for r in self.results]
        parts += [f"<p>{html.escape(line)}</p>" for line in self.lines()[-2:]]
        return "\n".join(parts)


class Notebook:
    """namespace: where the answers are (default: the notebook's own variables)."""

    def __init__(self, tests: str | Path = "tests", namespace: dict | None = None):
        self.tests, self.namespace = Path(tests), namespace
        if (self.tests / "concepts.json").exists():  # the release's sealed concept questions: checked without their answers
            from gptlib.exercises import sealed

            sealed.load_released(json.loads((self.tests / "concepts.json").read_text(encoding="utf-8")))

    def check(self, name: str) -> CheckReport:
        from .variants import shifted_seeds

        test = load(self.tests / f"{name}.py")
        from gptlib import exercises

        variables = _notebook_variables() if self.namespace is None else self.namespace
        namespace = {**variables, "exercises": exercises}  # the name the checks use

        def run(check: str, seed_offset: int = 0, functions: tuple[str, ...] = ()):  # public cases: no offset, no functions
            with shifted_seeds(seed_offset):
                return eval(check, namespace)

        return CheckReport(test, tuple(case(run) for case in test.cases if not case.hidden))
