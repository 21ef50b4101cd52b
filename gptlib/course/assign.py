"""Build the assignments: for every notebook that asks questions, the student's folder and the
autograder's folder (`python -m gptlib.course assign`, `make assignments`).

    OUT/student/NN_name/NN_name.ipynb      the notebook as released (questions.student_notebook)
    OUT/student/NN_name/tests/NAME.py      public cases only: what grader.check runs
    OUT/autograder/NN_name/tests/NAME.py   public and hidden cases (mode 0700: only the instructor reads it)
    OUT/autograder/NN_name/questions.json  the graded questions, in the notebook's order

Every question is worth 1 point on its public case; a question whose answer is a function gets a
hidden variant worth 1 more point (variants.py, a secret seed offset drawn here). A question
whose answer is an object or a class (`check_own_model(MyGPT(), ...)`, a build-track component)
is practice: public, 0 points, since the judge only takes plain data and function calls out of
a submission's process.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from pathlib import Path

from . import cases
from .questions import questions, student_notebook


def build(notebooks: list[Path], out: Path, hints: bool = True, worked: bool = True) -> list[str]:
    """Write the assignments of the notebooks that have questions; returns their names."""
    built = []
    for path in sorted(notebooks):
        notebook = json.loads(path.read_text(encoding="utf-8"))
        asked = questions(notebook)
        if not asked:
            continue
        student, autograder = out / "student" / path.stem, out / "autograder" / path.stem
        for folder in (student, autograder):
            shutil.rmtree(folder, ignore_errors=True)
            (folder / "tests").mkdir(parents=True)
        os.chmod(out / "autograder", 0o700)
        released = student_notebook(notebook, hints=hints, worked=worked)
        (student / path.name).write_text(json.dumps(released, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        for q in asked:
            points = 1 if q.gradable else 0
            (student / "tests" / f"{q.name}.py").write_text(cases.source(q, None, points))
            if q.gradable:
                offset = secrets.randbelow(2**31) + 1 if q.functions else None
                (autograder / "tests" / f"{q.name}.py").write_text(cases.source(q, offset, points))
        graded = [q.name for q in asked if q.gradable]
        (autograder / "questions.json").write_text(json.dumps(graded) + "\n")
        built.append(path.stem)
    return built
