"""Grade a class: SUBMISSIONS/<student>/<NN_name>.ipynb against OUT/autograder (`python -m gptlib_course grade`).

grade_class does the command's steps in order, each in a module of its own:

    jobs.py        one job per entry of the class folder and assignment, whatever the entry is (a link, a file, a
                   FIFO, an odd name: all zeros, with the reason); the assignments' test files
    results.py     grades kept by an earlier run of the same notebooks and tests are reused; each graded notebook
                   is kept at once (Ctrl-C keeps them, the same command resumes); at the end each graded student's
                   outcomes are stored in OUT/results/<student>.json
    pool.py        the judges, one process per core, each with its own sandbox (judge.py, sandbox.py): a crash, a
                   loop, a flood of output or a missing import costs that submission the cases it touched, with the
                   reason, never the batch
    gradebook.py   from the whole store and the gradebook: OUT/grades.csv, OUT/canvas.csv, OUT/gradescope/
    feedback.py    OUT/feedback/<student>.html for each graded student: what the checker said, case by case

The sandbox holds nothing of the class, the tests or the grades, and hides gptlib's answers
(gptlib/exercises/answers/). Every file is written atomically, in UTF-8 whatever the locale.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from tqdm.auto import tqdm

from . import feedback, gradebook, results
from .jobs import Job, find
from .limits import Limits
from .results import NotebookGrade
from .sandbox import confinement_problem


class Unconfinable(RuntimeError):
    """This machine cannot confine submissions (no bwrap, no user namespaces): the message says why."""


def grade_class(submissions: Path, autograder: Path, out: Path, workers: int | None = None,
                limits: Limits = Limits(), students: list[str] | None = None, book: Path | None = None,
                progress: bool = False) -> dict[str, list[NotebookGrade]]:
    """Grade every student's notebooks (or only `students`'s) in parallel; stores their outcomes in
    OUT/results, then writes every export from the whole store (gradebook.py) and the graded students'
    feedback pages. book: the gradebook file (default: points of the test files, no deadline). Grades
    kept in OUT/graded by an earlier run of the same notebooks and tests are reused. Raises
    Unconfinable where limits.confined and this machine cannot confine a submission."""
    from . import pool  # loads torch (seconds): the command imports it only once read_class took the class

    submissions, autograder, out = (p.resolve() for p in (submissions, autograder, out))
    book_of_class, jobs = read_class(submissions, autograder, out, students, book)
    if limits.confined and (problem := confinement_problem()):
        raise Unconfinable(problem)
    grades = {job: grade for job in jobs if (grade := results.kept(out, job)) is not None}
    zeros = sum(_earned(g) == 0 for g in grades.values())
    with tqdm(total=len(jobs), initial=len(grades), unit="notebook", desc="grading", disable=not progress,
              mininterval=1.0) as bar:
        bar.set_postfix(zeros=zeros)

        def done(job: Job, grade: NotebookGrade) -> None:
            nonlocal zeros
            grades[job] = grade
            results.keep(out, job, grade)
            zeros += _earned(grade) == 0
            bar.set_postfix(zeros=zeros, refresh=False)
            bar.update()

        pending = [job for job in jobs if job not in grades]
        pool.run([j for j in pending if j.path is None], limits, 0, done)  # nothing to run: no judge needed
        pool.run([j for j in pending if j.path is not None], limits, workers or os.cpu_count() or 1, done)
    by_student: dict[str, list[NotebookGrade]] = {}
    submitted: dict[str, list[float | None]] = {}
    for job in jobs:
        by_student.setdefault(job.student, []).append(grades[job])
        submitted.setdefault(job.student, []).append(results.submitted_at(job.path))
    for student, notebooks in by_student.items():
        gradebook.write_atomically(out / "results" / f"{gradebook.file_name(student)}.json",
                                   json.dumps(results.stored(student, notebooks, submitted[student])) + "\n")
    store = results.load_results(out / "results")
    for name, text in gradebook.exports(book_of_class, store).items():
        gradebook.write_atomically(out / name, text)
    for student in by_student:
        gradebook.write_atomically(out / "feedback" / f"{gradebook.file_name(student)}.html",
                                   feedback.page(student, store[student], book_of_class))
    return by_student


def read_class(submissions: Path, autograder: Path, out: Path, students: list[str] | None = None,
               book: Path | None = None) -> tuple[gradebook.Book, list[Job]]:
    """The class as grade_class reads it before grading: (the gradebook, one job per student and assignment).
    A damaged store (OUT/results), an empty class, a bad gradebook or question list raise ValueError
    (files.BadFile names the file); nothing is written. The store and the class folder are read before
    anything loads torch (the default gradebook reads the test files: gptlib)."""
    if (out / "results").is_dir():
        results.load_results(out / "results")
    jobs = find(submissions, autograder, students)
    book_of_class = gradebook.load(book) if book is not None and book.exists() else gradebook.default_book(autograder)
    return book_of_class, jobs


def _earned(grade: NotebookGrade) -> float:
    return sum(o.earned for o in grade.outcomes)
