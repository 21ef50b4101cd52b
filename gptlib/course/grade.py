"""Grade a class: SUBMISSIONS/<student>/<NN_name>.ipynb against OUT/autograder (`python -m gptlib.course grade`).

Each (student, notebook) is one job for a pool of judge processes, one per core; each judge runs
its submissions in a sandbox of its own (judge.py, sandbox.py), so a crash, a loop, a flood of
output or a missing import costs that submission the cases it touched, with the reason, and never
the batch; a judge that dies costs the notebook it was grading, and a fresh judge takes its place.
The class folder is read as untrusted: every entry gets a row (a link, a file, a FIFO, an
unreadable or odd name: all zeros, with the reason), a notebook is opened without following links
(judge.read_notebook), duplicates such as NN_name-Copy1.ipynb are named in the feedback.

Each graded notebook is kept at once in OUT/graded/ (one JSON file per student and notebook, written
atomically): a run stopped by Ctrl-C keeps them, and the same command resumes, regrading only
notebooks whose file or tests changed. At the end it writes OUT/grades.csv (one row per student,
one column per question: points) and OUT/feedback/<student>.html (what the checker said, case by
case; a hidden case shows the checker's verdict and message, never its code, configurations or
details), each atomically (a temporary file renamed), in UTF-8 whatever the locale.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import hashlib
import html
import io
import json
import multiprocessing
import os
import time
from dataclasses import dataclass
from multiprocessing.connection import wait
from pathlib import Path

from tqdm.auto import tqdm

from . import cases
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
    student: str  # the folder's name as the file system gives it (undecodable bytes as surrogates)
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


def _jobs(submissions: Path, autograder: Path) -> list[Job]:
    """One job per entry of the class folder and assignment, whatever the entry is."""
    assignments = sorted(p for p in autograder.iterdir() if (p / "questions.json").exists())
    jobs = []
    for entry in sorted(os.scandir(submissions), key=lambda e: os.fsencode(e.name)):
        try:
            names = set(os.listdir(entry.path)) if entry.is_dir(follow_symlinks=False) else None
            reason = "the student's folder is a symbolic link: not followed" if entry.is_symlink() else "not a folder"
        except OSError as error:
            names, reason = None, f"the student's folder cannot be read ({error.strerror})"
        for a in assignments:
            if names is None:
                jobs.append(Job(entry.name, str(a), None, reason))
                continue
            wanted = f"{a.name}.ipynb"
            others = sorted(n for n in names if n != wanted and n.startswith(a.name) and n.endswith(".ipynb"))
            notes = tuple(f"{shown(n)} was handed in too: not graded (only {wanted} is)" for n in others)
            if wanted in names:
                jobs.append(Job(entry.name, str(a), os.path.join(entry.path, wanted), notes=notes))
            else:
                jobs.append(Job(entry.name, str(a), None, "not submitted" + (f" (only {shown(others[0])}: name it "
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
    key = os.fsencode(job.student) + b"\0" + Path(job.folder).name.encode()
    return out / "graded" / f"{hashlib.sha256(key).hexdigest()}.json"


def _keep(out: Path, job: Job, grade: NotebookGrade) -> None:
    record = {"fingerprint": _fingerprint(job), "grade": dataclasses.asdict(grade)}
    write_atomically(_kept_path(out, job), json.dumps(record))  # student names never enter the file: no encoding issue


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


def write_atomically(path: Path, text: str) -> None:
    """The whole file or none: written beside it, flushed to disk, then renamed over it (UTF-8, any locale)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # grades are the instructor's to hand out
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(temporary, "w", encoding="utf-8", errors="backslashreplace", newline="") as file:
        file.write(text)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)


def shown(student: str) -> str:
    """A student's folder name as text: bytes that are not UTF-8 written as \\xNN."""
    return os.fsencode(student).decode("utf-8", "backslashreplace")


def feedback_name(student: str) -> str:
    """The feedback page's file name: the folder's name where it is a safe one, else its start and a hash."""
    name = shown(student)
    if name.isprintable() and "/" not in name and not name.startswith(".") and len(name.encode()) <= 200:
        return f"{name}.html"
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in name)[:40]
    return f"{safe}-{hashlib.sha256(os.fsencode(student)).hexdigest()[:12]}.html"


def grade_class(submissions: Path, autograder: Path, out: Path, workers: int | None = None,
                limits: Limits = Limits(), progress: bool = False) -> dict[str, list[NotebookGrade]]:
    """Grade every student's notebooks in parallel; writes grades.csv and the feedback pages. Grades
    kept in OUT/graded by an earlier run of the same notebooks and tests are reused. Raises
    Unconfinable where limits.confined and this machine cannot confine a submission."""
    if limits.confined and (problem := confinement_problem()):
        raise Unconfinable(problem)
    submissions, autograder, out = (p.resolve() for p in (submissions, autograder, out))
    jobs = _jobs(submissions, autograder)
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
    for job in jobs:
        by_student.setdefault(job.student, []).append(grades[job])
    write_csv(by_student, out / "grades.csv")
    for student, notebooks in by_student.items():
        write_atomically(out / "feedback" / feedback_name(student), feedback_page(student, notebooks))
    return by_student


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

    def hand_out(connection, process) -> None:
        if pending:
            job = pending.pop(0)
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
                    hand_out(connection, process)
                done(job, grade)
    finally:
        for process, _ in busy.values():
            process.kill()
            process.join(timeout=60)


def columns(by_student: dict[str, list[NotebookGrade]]) -> list[str]:
    first = next(iter(by_student.values()), [])
    return [f"{g.notebook}:{q}" for g in first for q in dict.fromkeys(o.question for o in g.outcomes)]


def write_csv(by_student: dict[str, list[NotebookGrade]], path: Path) -> None:
    names = columns(by_student)
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(["student", *names, "total"])
    for student, notebooks in by_student.items():
        points = {name: 0.0 for name in names}
        for grade in notebooks:
            for o in grade.outcomes:
                points[f"{grade.notebook}:{o.question}"] += o.earned
        writer.writerow([shown(student), *(f"{points[n]:g}" for n in names), f"{sum(points.values()):g}"])
    write_atomically(path, text.getvalue())


_COLOURS = {"passed": "#2e7d32", "failed": "#c62828", "not attempted yet": "#757575", "error": "#ef6c00"}


def feedback_page(student: str, notebooks: list[NotebookGrade]) -> str:
    e, student = html.escape, shown(student)
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
        parts += [f"<p>{e(note)}</p>" for note in grade.notes]
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
