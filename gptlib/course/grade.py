"""Grade a class: SUBMISSIONS/<student>/<NN_name>.ipynb against OUT/autograder (`python -m gptlib.course grade`).

Each (student, notebook) is one job for a pool of judge processes, one per core; each job runs
its submission in a confined process of its own (judge.py, sandbox.py), so a crash, a loop, a
flood of output or a missing import costs that submission the cases it touched, with the reason,
and never the batch. The folders of submissions, tests and results, and gptlib's answers
(gptlib/exercises/answers/), are hidden from every submission. A student may hand in the zip
grader.export() writes (SUBMISSIONS/<student>/<NN_name>.zip). Stores each graded student's
outcomes in OUT/results/<student>.json and writes, from that store and the gradebook
(gradebook.py), OUT/grades.csv, OUT/canvas.csv, OUT/gradescope/<NN_name>.csv and
OUT/feedback/<student>.html (what the checker said, case by case; a hidden case shows its verdict
in fixed words, never its code, configurations, details or the student's own error text).
"""

from __future__ import annotations

import dataclasses
import functools
import html
import json
import multiprocessing
import os
import tempfile
import time
import zipfile
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from . import cases, gradebook
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
    if not submission.endswith(".zip"):
        return grade_notebook(Path(submission), tests, limits, hide)
    with tempfile.TemporaryDirectory(prefix="gptlib-unzipped-") as unzipped:
        notebook = Path(unzipped) / f"{Path(folder).name}.ipynb"
        try:
            notebook.write_bytes(_from_zip(Path(submission), notebook.name))
        except (OSError, ValueError, zipfile.BadZipFile) as error:
            grade = NotebookGrade(Path(folder).name)
            grade.outcomes = [CaseOutcome(t.name, c.hidden, c.points, 0, "error", f"not a readable hand-in: {error}")
                              for t in tests for c in t.cases]
            return grade
        return grade_notebook(notebook, tests, limits, hide)


ZIP_MEMBER_LIMIT = 64 * 2**20  # bytes of a notebook unpacked from a hand-in


def _from_zip(path: Path, member: str) -> bytes:
    """The notebook `member` of a grader.export() zip, read at most ZIP_MEMBER_LIMIT bytes (never extracted by path)."""
    with zipfile.ZipFile(path) as archive:
        try:
            info = archive.getinfo(member)
        except KeyError:
            raise ValueError(f"the zip holds no {member}") from None
        if info.file_size > ZIP_MEMBER_LIMIT:
            raise ValueError(f"{member} unpacks to more than {ZIP_MEMBER_LIMIT // 2**20} MiB")
        with archive.open(info) as file:
            return file.read(ZIP_MEMBER_LIMIT + 1)[:ZIP_MEMBER_LIMIT]


def _worker_init() -> None:
    import torch

    torch.set_num_threads(1)  # one core per job: the pool has one job per core


def _jobs(submissions: Path, autograder: Path, students: list[str] | None = None) -> list[tuple[str, str, str | None]]:
    assignments = sorted(p for p in autograder.iterdir() if (p / "questions.json").exists())
    found = sorted(p for p in submissions.iterdir() if p.is_dir())
    if students is not None:
        missing = set(students) - {p.name for p in found}
        if missing:
            raise ValueError(f"no folder {submissions}/<student> for {', '.join(sorted(missing))}")
        found = [p for p in found if p.name in students]
    return [(s.name, str(a), _submitted_file(s, a.name)) for s in found for a in assignments]


def _submitted_file(folder: Path, name: str) -> str | None:
    """The student's notebook NAME.ipynb, or the one inside NAME.zip (grader.export()'s hand-in): None if neither."""
    notebook = folder / f"{name}.ipynb"
    if notebook.exists() or notebook.is_symlink():
        return str(notebook)
    return str(folder / f"{name}.zip") if (folder / f"{name}.zip").is_file() else None


def _submitted_at(path: str | None) -> float | None:
    """When the collected file was last written (its modification time, not following a link)."""
    return None if path is None else os.lstat(path).st_mtime


def grade_class(submissions: Path, autograder: Path, out: Path, workers: int | None = None,
                limits: Limits = Limits(), students: list[str] | None = None,
                book: Path | None = None) -> dict[str, list[NotebookGrade]]:
    """Grade every student's notebooks (or only `students`'s) in parallel; stores their outcomes in
    OUT/results, then writes every export from the whole store (gradebook.py) and the graded students'
    feedback pages. book: the gradebook file (default: points of the test files, no deadline)."""
    submissions, autograder, out = (p.resolve() for p in (submissions, autograder, out))
    (out / "feedback").mkdir(parents=True, exist_ok=True)
    hide = [str(submissions), str(autograder), str(out), str(ANSWERS)]  # ANSWERS: the reference solutions
    jobs = _jobs(submissions, autograder, students)
    book_of_class = gradebook.load(book) if book is not None and book.exists() else default_book(autograder)
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
    submitted: dict[str, list[float | None]] = {}
    for student, folder, path in jobs:
        by_student.setdefault(student, []).append(grades[student, folder])
        submitted.setdefault(student, []).append(_submitted_at(path))
    for student, notebooks in by_student.items():
        gradebook.write_atomically(out / "results" / f"{gradebook.file_name(student)}.json",
                                   json.dumps(stored(student, notebooks, submitted[student])) + "\n")
    results = load_results(out / "results")
    for name, text in gradebook.exports(book_of_class, results).items():
        gradebook.write_atomically(out / name, text)
    for student in by_student:
        gradebook.write_atomically(out / "feedback" / f"{gradebook.file_name(student)}.html",
                                   feedback_page(student, results[student], book_of_class))
    return by_student


def default_book(autograder: Path) -> gradebook.Book:
    """The gradebook of the test files' own points (what `assign` writes to OUT/gradebook.ini)."""
    return gradebook.parse(gradebook.default_text(book_points(autograder)))


def book_points(autograder: Path) -> dict[str, dict[str, dict[str, float]]]:
    """{assignment: {question: {"public": points, "hidden": points}}} from the autograder's test files."""
    assignments = sorted(p for p in autograder.iterdir() if (p / "questions.json").exists())
    return {a.name: {t.name: {"hidden" if c.hidden else "public": c.points for c in t.cases} for t in load_tests(str(a))}
            for a in assignments}


def stored(student: str, notebooks: list[NotebookGrade], submitted: list[float | None]) -> dict:
    """What results/<student>.json keeps of a student's grading."""
    return {"student": student, "notebooks": [
        {"notebook": g.notebook, "submitted": at, "outcomes": [dataclasses.asdict(o) for o in g.outcomes],
         "cell_errors": g.cell_errors} for g, at in zip(notebooks, submitted)]}


def load_results(folder: Path) -> dict[str, dict]:
    """Every stored student's results, by name, in name order."""
    results = [json.loads(p.read_text(encoding="utf-8")) for p in folder.glob("*.json")]
    return {r["student"]: r for r in sorted(results, key=lambda r: r["student"])}


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


_COLOURS = {"passed": "#2e7d32", "failed": "#c62828", "not attempted yet": "#757575", "error": "#ef6c00"}


def _text(text: str) -> str:
    """Student-reachable text for a page: escaped, without control characters, its line breaks as <br>."""
    return "<br>".join(html.escape(gradebook.clean(line)) for line in str(text).split("\n"))


def feedback_page(student: str, result: dict, book: gradebook.Book) -> str:
    """A student's page from their stored result: per assignment its score (and the late policy's effect),
    then per question and case the points and the checker's verdict and message (a hidden case: fixed words)."""
    e = _text
    scores = {a: gradebook.score(book, a, next((n for n in result["notebooks"] if n["notebook"] == a), None))
              for a in book.assignments}
    parts = [f"<!doctype html><meta charset='utf-8'><title>Feedback: {e(student)}</title>",
             "<style>body{font-family:sans-serif;max-width:60em} td{vertical-align:top;padding:4px 8px} "
             "div.text{font-family:monospace}</style>",
             f"<h1>Feedback for {e(student)}</h1><p>Overall: {gradebook.overall(book, scores):.1f}%.</p>"]
    for notebook in result["notebooks"]:
        name = notebook["notebook"]
        score = scores.get(name)
        if score is not None:
            late = (f" Handed in {score.hours_late:.1f} hours after the deadline: {score.kept:.0%} of the points kept."
                    if score.kept < 1 else "")
            parts.append(f"<h2>{e(name)}</h2><p>{score.earned:g} of {score.possible:g} points.{e(late)}</p>")
        else:
            parts.append(f"<h2>{e(name)}</h2>")
        parts.append("<table><tr><th>question</th><th>test</th><th>points</th><th>verdict</th></tr>")
        for o in notebook["outcomes"]:
            case = "hidden" if o["hidden"] else "public"
            worth = book.assignments[name].points.get(o["question"], {}).get(case, 0) if score is not None else o["points"]
            text = "\n".join([o["message"], *o["details"]])
            parts.append(f"<tr class='{case}'><td>{e(o['question'])}</td>"
                         f"<td>{'hidden variant' if o['hidden'] else 'public'}</td>"
                         f"<td>{worth if o['earned'] > 0 else 0:g} / {worth:g}</td>"
                         f"<td style='border-left:4px solid {_COLOURS.get(o['status'], '#000')}'><b>{e(o['status'])}</b>"
                         f"<div class='text'>{e(text)}</div></td></tr>")
        parts.append("</table>")
        if notebook["cell_errors"]:
            parts.append("<p>Cells of your notebook that raised an error when graded:</p><ul>")
            parts += [f"<li><div class='text'>{e(error)}</div></li>" for error in notebook["cell_errors"]]
            parts.append("</ul>")
    return "\n".join(parts) + "\n"


def throughput(submissions: int, seconds: float) -> str:
    return f"{submissions} notebooks in {seconds:.1f} s: {60 * submissions / seconds:.1f} per minute"


def timed_grade_class(*args, **kwargs) -> tuple[dict[str, list[NotebookGrade]], float]:
    start = time.monotonic()
    return grade_class(*args, **kwargs), time.monotonic() - start
