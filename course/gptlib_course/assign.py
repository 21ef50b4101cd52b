"""Build the assignments: for every notebook that asks questions, the student's folder and the
autograder's folder (`python -m gptlib_course assign`, `make assignments`).

    OUT/student/NN_name/NN_name.ipynb      the notebook as released (questions.student_notebook)
    OUT/student/NN_name/tests/NAME.py      public cases only: what grader.check runs
    OUT/student/NN_name/tests/concepts.json  the concept questions' sealed records (checking/sealed.py)
    OUT/autograder/NN_name/tests/NAME.py   public and hidden cases (mode 0700: only the instructor reads it)
    OUT/autograder/NN_name/questions.json  the graded questions, in the notebook's order
    OUT/student/NN_name/tests/questions.json  every question, in order (grader.check_all)
    OUT/gradebook.ini                      points per case, weights, deadlines, late policy (gradebook.py)

Every question is worth 1 point on its public case; a question whose answer is a function or a class,
and a number concept question (answered by a function of its sizes), gets a hidden variant worth 1 more
point (gptlib/checking/variants.py, a secret seed offset drawn here). A build-track
class (notebook 09) stays in the submission's process: the judge's checker works on a mirror of the
module it builds (remote_module.py, inside/remote_module.py). A question whose argument is an expression
(`check_own_model(MyGPT(), ...)`) is practice: public, 0 points, since the judge evaluates no
expression of the student's.

What a class gets holds no answer: no reference solution (gptlib/exercises/answers/ is not in the
student image, and grading hides it), no concept answer (concept questions are checked from sealed
records, salted afresh by every build), no pointer to `concept_answer`, no `show_solution` line, and
no worked answer to a graded question: a cell of the notebook's own sections that defines a function
passing a graded question's public check (notebook 05's `derived_rows` answers `parameter_table`)
is replaced by a line saying it is withheld (worked_answers; measured, not listed by hand).
"""

from __future__ import annotations

import ast
import json
import math
import os
import secrets
import shutil
from pathlib import Path

import numpy as np
import torch

import gptlib
from gptlib import exercises
from gptlib.assignment import cases
from gptlib.checking import sealed

from . import files, gradebook
from .questions import Question, code_cells, questions, student_notebook

NOTEBOOK = {"cells": [{"cell_type": str, "source": (str, [str])}]}  # what the kit reads of a notebook
ANSWERS = Path(exercises.__file__).parent / "answers"  # what a class never gets (exercises/answers/__init__.py)


def concept_id(question: Question) -> str | None:
    """The id of the sealed record a question is checked with ("1.1", "post_norm_statement"), or None."""
    call = ast.parse(question.check, mode="eval").body
    if call.func.attr == "check_concept":
        return call.args[0].value
    return "post_norm_statement" if call.func.attr == "check_post_norm_statement" else None


def has_hidden_variant(question: Question) -> bool:
    """Whether a graded question gets a hidden case: its answer is a function or class the notebook defines,
    or it is a number concept question, whose answer may be a function of the sizes it states."""
    from gptlib.exercises.answers.concepts import ASKED_ELSEWHERE

    return question.gradable and (question.functions or concept_id(question) in ASKED_ELSEWHERE)


def sealed_concepts(asked: list[Question]) -> dict[str, dict]:
    """The sealed records of the choice and number questions asked, under one fresh salt."""
    from gptlib.exercises.answers.concepts import SEALED

    salt = secrets.token_bytes(16)
    ids = [i for i in map(concept_id, asked) if i is not None]
    return {i: sealed.seal(i, SEALED[i], salt) for i in ids}


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        try:
            return torch.allclose(torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64))
        except (TypeError, ValueError, RuntimeError):
            return False
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    try:
        return bool(a == b)
    except Exception:
        return False


def _reference_points(question: Question) -> list[tuple[tuple, object]]:
    """(arguments, the reference solution's value) at every point the question's public check asks: the
    reference is the solution in exercises/answers/solutions.py that passes the check."""
    from gptlib.exercises.answers import solutions

    for reference in (f for part in solutions.SOLUTIONS.values() for f in part):
        seen = []

        def recording(*args, reference=reference, seen=seen):
            seen.append((args, reference(*args)))
            return seen[-1][1]

        recording.__name__ = reference.__name__
        if eval(question.check, {"exercises": exercises, question.answers[0]: recording}):
            return seen
    return []


def worked_answers(notebook: dict, asked: list[Question]) -> dict[int, list[str]]:
    """{cell index: its functions that give a graded question's answer}: the notebook's own worked
    answers. A function a cell defines (other than the answers' stubs), run alone, gives an answer
    when it agrees with the reference solution at any point the question's public check asks
    (`derived_rows` assumes d_ff = 4d: wrong for some random configurations, right for the course one)."""
    stubs = {a for q in asked for a in q.answers}
    candidates = []
    for index, source in code_cells(notebook):
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef) or node.name in stubs:
                continue
            namespace = {"torch": torch, "gptlib": gptlib, "math": math, "np": np}
            try:
                exec(compile(ast.Module([node], []), "<worked>", "exec"), namespace)
            except Exception:  # a decorator or default that needs the notebook's state: not a standalone answer
                continue
            candidates.append((index, node.name, namespace[node.name]))
    found: dict[int, list[str]] = {}
    if not candidates:
        return found
    for question in (q for q in asked if q.gradable and q.functions and len(q.answers) == 1):
        points = _reference_points(question)
        for index, name, function in candidates:
            if any(_agrees(function, args, value) for args, value in points):
                found.setdefault(index, []).append(name)
    return found


def _agrees(function, args: tuple, value) -> bool:
    try:
        with torch.no_grad():
            return _same(function(*args), value)
    except Exception:  # a helper of the notebook's, not an answer
        return False


def build(notebooks: list[Path], out: Path, hints: bool = True, worked: bool = True) -> list[str]:
    """Write the assignments of the notebooks that have questions; returns their names."""
    read = {path: files.read(path, files.json_of(NOTEBOOK)) for path in sorted(notebooks)}  # all, before writing
    book = out / "gradebook.ini"
    kept = gradebook.load(book) if book.exists() else None
    built = []
    for path, notebook in read.items():
        asked = questions(notebook)
        if not asked:
            continue
        student, autograder = out / "student" / path.stem, out / "autograder" / path.stem
        for folder in (student, autograder):
            shutil.rmtree(folder, ignore_errors=True)
            (folder / "tests").mkdir(parents=True)
        os.chmod(out / "autograder", 0o700)
        released = student_notebook(notebook, hints=hints, worked=worked, withheld=worked_answers(notebook, asked))
        concepts = sealed_concepts(asked)
        if concepts:
            (student / "tests" / "concepts.json").write_text(json.dumps(concepts, indent=1) + "\n")
        (student / path.name).write_text(json.dumps(released, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        for q in asked:
            points = 1 if q.gradable else 0
            (student / "tests" / f"{q.name}.py").write_text(cases.source(q, None, points))
            if q.gradable:
                offset = secrets.randbelow(2**31) + 1 if has_hidden_variant(q) else None
                (autograder / "tests" / f"{q.name}.py").write_text(cases.source(q, offset, points))
        graded = [q.name for q in asked if q.gradable]
        (autograder / "questions.json").write_text(json.dumps(graded) + "\n")
        (student / "tests" / "questions.json").write_text(json.dumps([q.name for q in asked]) + "\n")
        built.append(path.stem)
    write_gradebook(out, built, kept)
    return built


def write_gradebook(out: Path, built: list[str], kept: gradebook.Book | None) -> None:
    """OUT/gradebook.ini (gradebook.py) at the test files' points: written when absent (kept None); an existing
    one, the instructor's (kept: as read before the build), is kept, with a section added for each assignment
    it lacks."""
    path = out / "gradebook.ini"
    points = gradebook.book_points(out / "autograder")
    if kept is not None:
        missing = {name: points[name] for name in built if name not in kept.assignments}
        if missing:
            path.write_text(path.read_text(encoding="utf-8") + gradebook.sections(missing), encoding="utf-8")
    else:
        path.write_text(gradebook.default_text(points), encoding="utf-8")
