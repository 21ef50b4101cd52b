"""Grade a class: SUBMISSIONS/<student>/<NN_name>.ipynb against OUT/autograder (`python -m gptlib.course grade`).

Each (student, notebook) is one job for a pool of judge processes, one per core; each job runs
its submission in a confined process of its own (judge.py, sandbox.py), so a crash, a loop, a
flood of output or a missing import costs that submission the cases it touched, with the reason,
and never the batch. The folders of submissions, tests and results are hidden from every
submission. Writes OUT/grades.csv (one row per student, one column per question: points) and
OUT/feedback/<student>.html (what the checker said, case by case; a hidden case shows the
checker's verdict and message, never its code, configurations or details).
"""

from __future__ import annotations

import csv
import functools
import html
import json
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from . import cases
from .assign import ANSWERS
from .judge import CaseOutcome, Limits, NotebookGrade, grade_notebook


@functools.cache
def load_tests(folder: str) -> list[cases.TestFile]:
    """The test files of one assignment, in the notebook's order."""
    names = json.loads((Path(folder) / "questions.json").read_text())
    return [cases.load(Path(folder) / "tests" / f"{name}.py") for name in names]


def _grade_job(folder: str, submission: str | None, limits: Limits, hide: list[str]) -> NotebookGrade:
    tests = load_tests(folder)
    if submission is None:
        grade = NotebookGrade(Path(folder).name)
        grade.outcomes = [CaseOutcome(t.name, c.hidden, c.points, 0, "error", "not submitted") for t in tests for c in t.cases]
        return grade
    return grade_notebook(Path(submission), tests, limits, hide)


def _worker_init() -> None:
    import torch

    torch.set_num_threads(1)  # one core per job: the pool has one job per core


def _jobs(submissions: Path, autograder: Path) -> list[tuple[str, str, str | None]]:
    assignments = sorted(p for p in autograder.iterdir() if (p / "questions.json").exists())
    students = sorted(p for p in submissions.iterdir() if p.is_dir())
    return [(s.name, str(a), str(s / f"{a.name}.ipynb") if (s / f"{a.name}.ipynb").exists() else None)
            for s in students for a in assignments]


def grade_class(submissions: Path, autograder: Path, out: Path, workers: int | None = None,
                limits: Limits = Limits()) -> dict[str, list[NotebookGrade]]:
    """Grade every student's notebooks in parallel; writes grades.csv and the feedback pages."""
    submissions, autograder, out = (p.resolve() for p in (submissions, autograder, out))
    (out / "feedback").mkdir(parents=True, exist_ok=True)
    hide = [str(submissions), str(autograder), str(out), str(ANSWERS)]  # ANSWERS: the reference solutions
    jobs = _jobs(submissions, autograder)
    workers = workers or os.cpu_count() or 1
    grades: dict[tuple[str, str], NotebookGrade] = {}
    pending = list(jobs)
    for batch_size in (workers, 1):  # a judge process that died breaks its pool: the jobs left are retried one per pool
        if not pending:
            break
        pending = _run_pool(pending, grades, batch_size, limits, hide)
    for student, folder, _ in pending:
        grade = _grade_job(folder, None, limits, hide)
        grade.outcomes = [CaseOutcome(o.question, o.hidden, o.points, 0, "error", "the grader itself failed on this notebook")
                          for o in grade.outcomes]
        grades[student, folder] = grade
    by_student: dict[str, list[NotebookGrade]] = {}
    for student, folder, _ in jobs:
        by_student.setdefault(student, []).append(grades[student, folder])
    write_csv(by_student, out / "grades.csv")
    for student, notebooks in by_student.items():
        (out / "feedback" / f"{student}.html").write_text(feedback_page(student, notebooks), encoding="utf-8")
    return by_student


def _run_pool(jobs, grades, workers, limits, hide) -> list:
    """Run the jobs on a pool of `workers` judges (one pool per job when workers is 1); returns those not done."""
    left = []
    chunks = [jobs] if workers > 1 else [[job] for job in jobs]
    context = multiprocessing.get_context("spawn")
    for chunk in chunks:
        with ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_worker_init) as pool:
            futures = {pool.submit(_grade_job, folder, path, limits, hide): (student, folder, path)
                       for student, folder, path in chunk}
            for future, job in futures.items():
                try:
                    grades[job[0], job[1]] = future.result()
                except BrokenProcessPool:
                    left.append(job)
    return left


def columns(by_student: dict[str, list[NotebookGrade]]) -> list[str]:
    first = next(iter(by_student.values()), [])
    return [f"{g.notebook}:{q}" for g in first for q in dict.fromkeys(o.question for o in g.outcomes)]


def write_csv(by_student: dict[str, list[NotebookGrade]], path: Path) -> None:
    names = columns(by_student)
    with open(path, "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["student", *names, "total"])
        for student, notebooks in by_student.items():
            points = {name: 0.0 for name in names}
            for grade in notebooks:
                for o in grade.outcomes:
                    points[f"{grade.notebook}:{o.question}"] += o.earned
            writer.writerow([student, *(f"{points[n]:g}" for n in names), f"{sum(points.values()):g}"])


_COLOURS = {"passed": "#2e7d32", "failed": "#c62828", "not attempted yet": "#757575", "error": "#ef6c00"}


def feedback_page(student: str, notebooks: list[NotebookGrade]) -> str:
    e = html.escape
    total = sum(o.earned for g in notebooks for o in g.outcomes)
    most = sum(o.points for g in notebooks for o in g.outcomes)
    parts = [f"<!doctype html><meta charset='utf-8'><title>Feedback: {e(student)}</title>",
             "<style>body{font-family:sans-serif;max-width:60em} td{vertical-align:top;padding:4px 8px} "
             "pre{white-space:pre-wrap;margin:0}</style>",
             f"<h1>Feedback for {e(student)}</h1><p>{total:g} of {most:g} points.</p>"]
    for grade in notebooks:
        parts.append(f"<h2>{e(grade.notebook)}</h2><table><tr><th>question</th><th>test</th><th>points</th><th>verdict</th></tr>")
        for o in grade.outcomes:
            text = "\n".join([o.message, *o.details])
            parts.append(f"<tr class='{'hidden' if o.hidden else 'public'}'><td>{e(o.question)}</td>"
                         f"<td>{'hidden variant' if o.hidden else 'public'}</td><td>{o.earned:g} / {o.points:g}</td>"
                         f"<td style='border-left:4px solid {_COLOURS.get(o.status, '#000')}'><b>{e(o.status)}</b>"
                         f"<pre>{e(text)}</pre></td></tr>")
        parts.append("</table>")
        if grade.cell_errors:
            parts.append("<p>Cells of your notebook that raised an error when graded:</p><ul>")
            parts += [f"<li><pre>{e(error)}</pre></li>" for error in grade.cell_errors]
            parts.append("</ul>")
    return "\n".join(parts) + "\n"


def throughput(submissions: int, seconds: float) -> str:
    return f"{submissions} notebooks in {seconds:.1f} s: {60 * submissions / seconds:.1f} per minute"


def timed_grade_class(*args, **kwargs) -> tuple[dict[str, list[NotebookGrade]], float]:
    start = time.monotonic()
    return grade_class(*args, **kwargs), time.monotonic() - start
