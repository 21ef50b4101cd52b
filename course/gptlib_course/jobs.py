"""What there is to grade: the assignments `assign` wrote into OUT/autograder and their test files, and one
Job per entry of the class folder (SUBMISSIONS/<student>/) and assignment.

The class folder is read as untrusted: every entry gets a job (a link, a file, a FIFO, an unreadable or
odd name: a job with nothing to grade and the reason), and the notebooks are found by name only, never
opened here (judge.read_notebook opens them). A student may hand in the zip grader.export() writes
(SUBMISSIONS/<student>/<NN_name>.zip); duplicates such as NN_name-Copy1.ipynb become the job's notes.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from . import files

if TYPE_CHECKING:  # importing gptlib loads torch (seconds of CPU), which report and the gradebook never need
    from gptlib.assignment.cases import TestFile


def assignments(autograder: Path) -> list[Path]:
    """The assignments' folders in OUT/autograder, in name order; ValueError where there is none."""
    found = sorted(p for p in autograder.iterdir() if (p / "questions.json").exists()) if autograder.is_dir() else []
    if not found:
        raise ValueError(f"{autograder}: holds no assignment (NN_name/questions.json): run assign first")
    return found


@functools.cache
def load_tests(folder: str) -> list[TestFile]:
    """The test files of one assignment, in the notebook's order."""
    names = files.read(Path(folder) / "questions.json", files.json_of([str]))
    from gptlib.assignment import cases  # gptlib (torch): after the list is read, so a bad one is refused in a moment

    return [cases.load(Path(folder) / "tests" / f"{name}.py") for name in names]


@dataclass(frozen=True)
class Job:
    student: str  # the folder's name read as UTF-8 (student_name: undecodable bytes as surrogates)
    folder: str  # the assignment's folder in OUT/autograder
    path: str | None  # the notebook to grade; None: nothing to grade, `reason` says why
    reason: str = "not submitted"
    notes: tuple[str, ...] = ()  # other files of the student's folder that look like this notebook


def find(submissions: Path, autograder: Path, students: list[str] | None = None) -> list[Job]:
    """One job per entry of the class folder (or only `students`'s) and assignment, whatever the entry is."""
    folders = assignments(autograder)
    entries = sorted(os.scandir(submissions), key=lambda e: os.fsencode(e.name))
    if not entries:
        raise ValueError(f"{submissions}: the class folder is empty (no <student>/ folder): nothing to grade")
    if students is not None:
        chosen = {student_name(s) for s in students}
        missing = chosen - {student_name(e.name) for e in entries}
        if missing:
            named = ", ".join(name_bytes(m).decode("utf-8", "backslashreplace") for m in sorted(missing))
            raise ValueError(f"no folder {submissions}/<student> for {named}")
        entries = [e for e in entries if student_name(e.name) in chosen]
    jobs = []
    for entry in entries:
        student = student_name(entry.name)
        try:
            names = set(os.listdir(entry.path)) if entry.is_dir(follow_symlinks=False) else None
            reason = "the student's folder is a symbolic link: not followed" if entry.is_symlink() else "not a folder"
        except OSError as error:
            names, reason = None, f"the student's folder cannot be read ({error.strerror})"
        for a in folders:
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


def student_name(name: str) -> str:
    """A student folder's name (as os.scandir gives it) as text, whatever the locale: its bytes read as
    UTF-8 (under LC_ALL=C without Python's UTF-8 mode, file names are read as ASCII: "José" would be
    "Jos\\udcc3\\udca9"), a byte that is not UTF-8 kept as os.fsdecode's surrogate (\\xNN in the exports)."""
    return os.fsencode(name).decode("utf-8", "surrogateescape")


def name_bytes(student: str) -> bytes:
    """The bytes of a student_name(), whatever the locale (os.fsencode cannot encode "José" under LC_ALL=C)."""
    return student.encode("utf-8", "surrogateescape")


def shown(name: str) -> str:
    """A file or folder name as text: bytes that are not UTF-8 written as \\xNN."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")
