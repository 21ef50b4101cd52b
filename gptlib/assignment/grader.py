"""The student's half: `grader = Notebook("tests")`, then in a notebook

    grader.check("NAME")   the public cases of tests/NAME.py on the student's own kernel: what the checker said
    grader.check_all()     every question of the notebook, in its order, and the public points in all
    grader.export()        NN_name.zip beside the notebook: the saved notebook, to hand in

It never says "all tests passed": the hidden cases are not in the student's folder, and the
report says that they run at grading.
"""

from __future__ import annotations

import html
import json
import zipfile
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


@dataclass(frozen=True)
class AllChecks:
    reports: tuple[CheckReport, ...]

    def lines(self) -> list[str]:
        lines = []
        for report in self.reports:
            public = [c for c in report.test.cases if not c.hidden]
            earned = sum(c.points for c, r in zip(public, report.results) if r)
            marks = ", ".join(r.status for r in report.results)
            lines.append(f"{report.test.name}: {earned:g} of {sum(c.points for c in public):g} ({marks})")
        earned = sum(c.points for r in self.reports for c, v in zip([c for c in r.test.cases if not c.hidden], r.results) if v)
        most = sum(c.points for r in self.reports for c in r.test.cases if not c.hidden)
        lines.append(f"public tests: {earned:g} of {most:g} points. Hidden tests run when your notebook is graded.")
        return lines

    def __bool__(self) -> bool:
        return all(self.reports)

    def __repr__(self) -> str:
        return "\n".join(self.lines())


class Notebook:
    """namespace: where the answers are (default: the notebook's own variables)."""

    def __init__(self, tests: str | Path = "tests", namespace: dict | None = None):
        self.tests, self.namespace = Path(tests), namespace
        if (self.tests / "concepts.json").exists():  # the release's sealed concept questions: checked without their answers
            from gptlib.exercises import concepts

            concepts.load_released(json.loads((self.tests / "concepts.json").read_text(encoding="utf-8")))

    def check(self, name: str) -> CheckReport:
        from ..checking import shifted_seeds

        test = load(self.tests / f"{name}.py")
        from gptlib import exercises

        variables = _notebook_variables() if self.namespace is None else self.namespace
        namespace = {**variables, "exercises": exercises}  # the name the checks use

        def run(check: str, seed_offset: int = 0, functions: tuple[str, ...] = ()):  # public cases: no offset, no functions
            with shifted_seeds(seed_offset):
                return eval(check, namespace)

        return CheckReport(test, tuple(case(run) for case in test.cases if not case.hidden))

    def check_all(self) -> AllChecks:
        """Every question's public tests, in the notebook's order (tests/questions.json)."""
        names = json.loads((self.tests / "questions.json").read_text(encoding="utf-8"))
        return AllChecks(tuple(self.check(name) for name in names))

    def export(self) -> Path:
        """Zip the notebook as last saved (save it first) into NN_name.zip beside it, and return the zip's
        path: the file to hand in. The notebook is the one released with these tests (NN_name/NN_name.ipynb)."""
        folder = self.tests.resolve().parent
        notebook = folder / f"{folder.name}.ipynb"
        try:
            json.loads(notebook.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise ValueError(f"cannot export {notebook}: {error} (hand in the notebook released in this folder)") from None
        target = folder / f"{folder.name}.zip"
        with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.write(notebook, notebook.name)
        print(f"{target} holds {notebook.name} as last saved: save the notebook first (Ctrl-S), then hand in the zip.")
        return target
