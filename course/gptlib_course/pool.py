"""The judges: a pool of processes, one per core, each grading one job (a student's notebook) at a time.

Each judge runs its submissions in a sandbox of its own (judge.py, sandbox.py), so a crash, a loop, a flood
of output or a missing import costs that submission the cases it touched, with the reason, and never the
batch; a judge that dies costs the notebook it was grading, which scores zero with the reason, and a fresh
judge takes its place. A judge keeps to one assignment while it lasts (its checkers warm up per assignment).

Ctrl-C or SIGTERM (interrupt.py) ends the judges at once, whatever they are doing (starting a sandbox, waiting
for a cell): the grader kills every judge it started, and a judge dies with the thread that started it (so
with a grader killed outright too), its sandbox with it. A judge ignores Ctrl-C itself: a terminal sends it
to the whole process group, and the grader ends the judges.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import signal
from multiprocessing.connection import wait
from pathlib import Path

from .jobs import Job, load_tests
from .judge import grade_notebook
from .limits import Limits
from .results import CaseOutcome, NotebookGrade
from .sandbox import Sandbox

PR_SET_PDEATHSIG = 1  # prctl: the signal a process gets when the thread that started it ends


def zeros(job: Job, reason: str) -> NotebookGrade:
    """The job's notebook scoring zero on every case, with the reason."""
    grade = NotebookGrade(Path(job.folder).name, notes=list(job.notes))
    grade.outcomes = [CaseOutcome(t.name, c.hidden, c.points, 0, "error", reason)
                      for t in load_tests(job.folder) for c in t.cases]
    return grade


def _grade_job(job: Job, limits: Limits) -> NotebookGrade:
    if job.path is None:
        return zeros(job, job.reason)
    grade = grade_notebook(Path(job.path), load_tests(job.folder), limits)
    grade.notes = list(job.notes)
    return grade


def _judge(connection, limits: Limits) -> None:
    """A judge process: grades the jobs it is sent, one at a time, until its pipe closes."""
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
    signal.signal(signal.SIGINT, signal.SIG_IGN)
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


def run(jobs: list[Job], limits: Limits, workers: int, done) -> None:
    """Grade `jobs` on `workers` judge processes (0: here, for jobs with nothing to run), calling
    done(job, grade) for each as it ends. A judge that dies costs the job it held: that notebook
    scores zero with the reason, and a fresh judge takes the next job. An exception here (Ctrl-C's
    included) kills every judge started before it propagates."""
    if workers == 0:
        for job in jobs:
            done(job, _grade_job(job, limits))
        return
    context = multiprocessing.get_context("spawn")
    pending, busy, judges = list(jobs), {}, []

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
        judges.append(process)
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
                    grade = zeros(job, f"the grader itself failed on this notebook (its judge ended: exit code "
                                        f"{process.exitcode})")
                    if pending:
                        start()
                else:
                    hand_out(connection, process, job)
                done(job, grade)
    finally:
        for process in judges:
            if process.exitcode is None and process.pid is not None:
                process.kill()
        for process in judges:
            if process.pid is not None:
                process.join(timeout=60)
