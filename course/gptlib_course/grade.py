"""Grade a class: SUBMISSIONS/<student>/<NN_name>.ipynb against OUT/autograder (`python -m gptlib_course grade`).

Each (student, notebook) is one job for a pool of judge processes, one per core; each judge runs
its submissions in a sandbox of its own (judge.py, sandbox.py), so a crash, a loop, a flood of
output or a missing import costs that submission the cases it touched, with the reason, and never
the batch; a judge that dies costs the notebook it was grading, and a fresh judge takes its place.
The sandbox holds nothing of the class, the tests or the grades, and hides gptlib's answers
(gptlib/exercises/answers/). The class folder is read as untrusted: every entry gets a row (a link,
a file, a FIFO, an unreadable or odd name: all zeros, with the reason), a notebook is opened without
following links (judge.read_notebook), duplicates such as NN_name-Copy1.ipynb are named in the
feedback. A student may hand in the zip grader.export() writes (SUBMISSIONS/<student>/<NN_name>.zip).

Each graded notebook is kept at once in OUT/graded/ (one JSON file per student and notebook, written
atomically): a run stopped by Ctrl-C keeps them, and the same command resumes, regrading only
notebooks whose file or tests changed. At the end it stores each graded student's outcomes in
OUT/results/<student>.json and writes, from that store and the gradebook (gradebook.py),
OUT/grades.csv, OUT/canvas.csv, OUT/gradescope/<NN_name>.csv and OUT/feedback/<student>.html (what
the checker said, case by case; a hidden case shows its verdict in fixed words, never its code,
configurations, details or the student's own error text), each atomically, in UTF-8 whatever the locale.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import html
import json
import multiprocessing
import os
import time
from dataclasses import dataclass
from multiprocessing.connection import wait
from pathlib import Path

from tqdm.auto import tqdm

from gptlib.course import cases

from . import gradebook
from .judge import CaseOutcome, Limits, NotebookGrade, Sandbox, grade_notebook
from .sandbox import confinement_problem


class Unconfinable(RuntimeError):
    """This machine cannot confine submissions (no bwrap, no user namespaces): the message says why."""


@functools.cache
def load_tests(folder: str) -> list[cases.TestFile]:
    """The test files of one assignment, in the notebook's order."""
    names = json.loads((Path(folder) / "questions.json").read_text(encoding="utf-8"))
    return [cases.load(Path(folder) / "tests" / f"{name}.py") for name in names]


@dataclass(frozen=True)
class Job:
    student: str  # the folder's name read as UTF-8 (gradebook.student_name: undecodable bytes as surrogates)
    folder: str  # the assignment's folder in OUT/autograder
    path: str | None  # the notebook to grade; None: nothing to grade, `reason` says why
    reason: str = "not submitted"
    notes: tuple[str, ...] = ()  # other files of the student's folder that look like this notebook


def _zeros(job: Job, reason: str) -> NotebookGrade:
    grade = NotebookGrade(Path(job.folder).name, notes=list(job.notes))
    grade.outcomes = [CaseOutcome(t.name, c.hidden, c.points, 0, "error", reason)
                      for t in load_tests(job.folder) for c in t.cases]
    return grade


def _grade_job(job: Job, limits: Limits) -> NotebookGrade:
    if job.path is None:
        return _zeros(job, job.reason)
    grade = grade_notebook(Path(job.path), load_tests(job.folder), limits)
    grade.notes = list(job.notes)
    return grade


def _jobs(submissions: Path, autograder: Path, students: list[str] | None = None) -> list[Job]:
    """One job per entry of the class folder (or only `students`'s) and assignment, whatever the entry is."""
    assignments = sorted(p for p in autograder.iterdir() if (p / "questions.json").exists())
    entries = sorted(os.scandir(submissions), key=lambda e: os.fsencode(e.name))
    if students is not None:
        chosen = {gradebook.student_name(s) for s in students}
        missing = chosen - {gradebook.student_name(e.name) for e in entries}
        if missing:
            raise ValueError(f"no folder {submissions}/<student> for {', '.join(gradebook.clean(m) for m in sorted(missing))}")
        entries = [e for e in entries if gradebook.student_name(e.name) in chosen]
    jobs = []
    for entry in entries:
        student = gradebook.student_name(entry.name)
        try:
            names = set(os.listdir(entry.path)) if entry.is_dir(follow_symlinks=False) else None
            reason = "the student's folder is a symbolic link: not followed" if entry.is_symlink() else "not a folder"
        except OSError as error:
            names, reason = None, f"the student's folder cannot be read ({error.strerror})"
        for a in assignments:
            if names is None:
                jobs.append(Job(student, str(a), None, reason))
                continue
            wanted, zipped = f"{a.name}.ipynb", f"{a.name}.zip"  # the notebook, or grader.export()'s hand-in
            others = sorted(n for n in names if n != wanted and n.startswith(a.name) and n.endswith(".ipynb"))
            notes = tuple(f"{shown(n)} was handed in too: not graded (only {wanted} is)" for n in others)
            if wanted in names or zipped in names:
                jobs.append(Job(student, str(a), os.path.join(entry.path, wanted if wanted in names else zipped),
                                notes=notes))
            else:
                jobs.append(Job(student, str(a), None, "not submitted" + (f" (only {shown(others[0])}: name it "
                                                                              f"{wanted})" if others else ""), notes))
    return jobs


@functools.cache
def _tests_digest(folder: str) -> bytes:
    tests = Path(folder)
    files = [tests / "questions.json", *sorted((tests / "tests").glob("*.py"))]
    return hashlib.sha256(b"\0".join(p.read_bytes() for p in files)).digest()


def _fingerprint(job: Job) -> str:
    """What a kept grade was made from: the notebook file (as lstat sees it) and the assignment's tests."""
    parts = [_tests_digest(job.folder)]
    if job.path is not None:
        try:
            found = os.lstat(job.path)
            parts.append(repr((found.st_ino, found.st_size, found.st_mtime_ns, found.st_mode)).encode())
        except OSError as error:
            parts.append(repr(error).encode())
    parts.append(repr((job.reason, job.notes)).encode())
    return hashlib.sha256(b"\0".join(parts)).hexdigest()


def _kept_path(out: Path, job: Job) -> Path:
    key = gradebook.name_bytes(job.student) + b"\0" + Path(job.folder).name.encode()
    return out / "graded" / f"{hashlib.sha256(key).hexdigest()}.json"


def _keep(out: Path, job: Job, grade: NotebookGrade) -> None:
    record = {"fingerprint": _fingerprint(job), "grade": dataclasses.asdict(grade)}
    gradebook.write_atomically(_kept_path(out, job), json.dumps(record))  # student names never enter the file


def _kept(out: Path, job: Job) -> NotebookGrade | None:
    try:
        record = json.loads(_kept_path(out, job).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if record.get("fingerprint") != _fingerprint(job):
        return None
    grade = record["grade"]
    outcomes = [CaseOutcome(**{**o, "details": tuple(o["details"])}) for o in grade.pop("outcomes")]
    return NotebookGrade(**grade, outcomes=outcomes)


def _submitted_at(path: str | None) -> float | None:
    """When the collected file was last written (its modification time, not following a link)."""
    try:
        return None if path is None else os.lstat(path).st_mtime
    except OSError:
        return None


def shown(name: str) -> str:
    """A file or folder name as text: bytes that are not UTF-8 written as \\xNN."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


def grade_class(submissions: Path, autograder: Path, out: Path, workers: int | None = None,
                limits: Limits = Limits(), students: list[str] | None = None, book: Path | None = None,
                progress: bool = False) -> dict[str, list[NotebookGrade]]:
    """Grade every student's notebooks (or only `students`'s) in parallel; stores their outcomes in
    OUT/results, then writes every export from the whole store (gradebook.py) and the graded students'
    feedback pages. book: the gradebook file (default: points of the test files, no deadline). Grades
    kept in OUT/graded by an earlier run of the same notebooks and tests are reused. Raises
    Unconfinable where limits.confined and this machine cannot confine a submission."""
    if limits.confined and (problem := confinement_problem()):
        raise Unconfinable(problem)
    submissions, autograder, out = (p.resolve() for p in (submissions, autograder, out))
    jobs = _jobs(submissions, autograder, students)
    book_of_class = gradebook.load(book) if book is not None and book.exists() else default_book(autograder)
    grades = {job: kept for job in jobs if (kept := _kept(out, job)) is not None}
    zeros = sum(_earned(g) == 0 for g in grades.values())
    with tqdm(total=len(jobs), initial=len(grades), unit="notebook", desc="grading", disable=not progress,
              mininterval=1.0) as bar:
        bar.set_postfix(zeros=zeros)

        def done(job: Job, grade: NotebookGrade) -> None:
            nonlocal zeros
            grades[job] = grade
            _keep(out, job, grade)
            zeros += _earned(grade) == 0
            bar.set_postfix(zeros=zeros, refresh=False)
            bar.update()

        pending = [job for job in jobs if job not in grades]
        _run_pool([j for j in pending if j.path is None], limits, 0, done)  # nothing to run: no judge needed
        _run_pool([j for j in pending if j.path is not None], limits, workers or os.cpu_count() or 1, done)
    by_student: dict[str, list[NotebookGrade]] = {}
    submitted: dict[str, list[float | None]] = {}
    for job in jobs:
        by_student.setdefault(job.student, []).append(grades[job])
        submitted.setdefault(job.student, []).append(_submitted_at(job.path))
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
         "cell_errors": g.cell_errors, "notes": g.notes} for g, at in zip(notebooks, submitted)]}


def load_results(folder: Path) -> dict[str, dict]:
    """Every stored student's results, by name, in name order."""
    results = [json.loads(p.read_text(encoding="utf-8")) for p in folder.glob("*.json")]
    return {r["student"]: r for r in sorted(results, key=lambda r: r["student"])}


def _earned(grade: NotebookGrade) -> float:
    return sum(o.earned for o in grade.outcomes)


def _judge(connection, limits: Limits) -> None:
    """A judge process: grades the jobs it is sent, one at a time, until its pipe closes."""
    import torch

    torch.set_num_threads(1)  # one core per judge: the pool has one judge per core
    while True:
        try:
            job = connection.recv()
        except EOFError:
            break
        connection.send(_grade_job(job, limits))
    if Sandbox._current is not None:
        Sandbox._current.close()


def _next_job(pending: list[Job], last: Job | None, elsewhere: set[str]) -> Job:
    """A judge's next job: of the assignment of its `last` while any is left, else of one no other judge is
    grading (`elsewhere`), else the first. A judge's checkers warm up (imports, references computed once)
    per assignment: so fewer judges pay for each."""
    same = (j for j in pending if last is not None and j.folder == last.folder)
    return next(same, None) or next((j for j in pending if j.folder not in elsewhere), pending[0])


def _run_pool(jobs: list[Job], limits: Limits, workers: int, done) -> None:
    """Grade `jobs` on `workers` judge processes (0: here, for jobs with nothing to run), calling
    done(job, grade) for each as it ends. A judge that dies costs the job it held: that notebook
    scores zero with the reason, and a fresh judge takes the next job. Ctrl-C ends every judge."""
    if workers == 0:
        for job in jobs:
            done(job, _grade_job(job, limits))
        return
    context = multiprocessing.get_context("spawn")
    pending, busy = list(jobs), {}

    def hand_out(connection, process, last: Job | None = None) -> None:
        if pending:
            job = _next_job(pending, last, {job.folder for _, job in busy.values()})
            pending.remove(job)
            connection.send(job)
            busy[connection] = (process, job)
        else:
            connection.close()
            process.join(timeout=60)

    def start() -> None:
        ours, theirs = context.Pipe()
        process = context.Process(target=_judge, args=(theirs, limits), daemon=True)
        process.start()
        theirs.close()
        hand_out(ours, process)

    try:
        for _ in range(min(workers, len(pending))):
            start()
        while busy:
            for connection in wait(list(busy)):
                process, job = busy.pop(connection)
                try:
                    grade = connection.recv()
                except (EOFError, OSError):
                    connection.close()
                    process.join(timeout=60)
                    grade = _zeros(job, f"the grader itself failed on this notebook (its judge ended: exit code "
                                        f"{process.exitcode})")
                    if pending:
                        start()
                else:
                    hand_out(connection, process, job)
                done(job, grade)
    finally:
        for process, _ in busy.values():
            process.kill()
            process.join(timeout=60)


_COLOURS = {"passed": "#2e7d32", "failed": "#c62828", "not attempted yet": "#757575", "error": "#ef6c00"}


def _text(text: str) -> str:
    """Student-reachable text for a page: escaped, without control characters, its line breaks as <br>."""
    return "<br>".join(html.escape(gradebook.clean(line)) for line in str(text).split("\n"))


def feedback_page(student: str, result: dict, book: gradebook.Book) -> str:
    """A student's page from their stored result: per assignment its score (and the late policy's effect),
    then per question and case the points and the checker's verdict and message (a hidden case: fixed words),
    and what the grader noted of the student's folder (a duplicate notebook)."""
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
        parts += [f"<p>{e(note)}</p>" for note in notebook.get("notes", [])]
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
