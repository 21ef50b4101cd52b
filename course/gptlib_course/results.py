"""What grading keeps: each graded notebook at once, and each graded student's outcomes.

    OUT/graded/<hash>.json      one graded notebook (a hash of the student's and the assignment's names: no
                                student name enters the file), with the fingerprint of what it was graded from:
                                a run stopped by Ctrl-C keeps them, and the same command resumes, regrading only
                                notebooks whose file or tests changed (kept, keep)
    OUT/results/<student>.json  a student's outcomes and submission times (stored): every export and feedback
                                page is made from this store and the gradebook (load_results), so a changed
                                weight, deadline or point needs no regrading

A graded notebook is a NotebookGrade of CaseOutcomes (defined here, the judge makes them: what is stored
and reported needs no torch).

Every file is written atomically (gradebook.write_atomically), in UTF-8 whatever the locale.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from . import files, gradebook
from .jobs import Job, name_bytes


@dataclass(frozen=True)
class CaseOutcome:
    question: str
    hidden: bool
    points: float
    earned: float
    status: str  # the checker's status ("passed", "failed", ...) or "error" for what stopped it
    message: str
    details: tuple[str, ...] = ()
    mistakes: tuple[str, ...] = ()  # identifiers of the typical mistakes the checker named (gptlib.checking.mistakes)


@dataclass
class NotebookGrade:
    notebook: str
    outcomes: list[CaseOutcome] = field(default_factory=list)
    cell_errors: list[str] = field(default_factory=list)  # "cell 7: ModuleNotFoundError: ...", judge.ERROR_TEXT characters in all
    confinement: dict = field(default_factory=dict)  # what the submission's process measured of itself (zygote.confinement)
    notes: list[str] = field(default_factory=list)  # what the grader saw in the student's folder: duplicates, odd files


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
    key = name_bytes(job.student) + b"\0" + Path(job.folder).name.encode()
    return out / "graded" / f"{hashlib.sha256(key).hexdigest()}.json"


def keep(out: Path, job: Job, grade: NotebookGrade) -> None:
    """Keep a graded notebook in OUT/graded with the fingerprint of what it was graded from."""
    record = {"fingerprint": _fingerprint(job), "grade": dataclasses.asdict(grade)}
    gradebook.write_atomically(_kept_path(out, job), json.dumps(record))  # student names never enter the file


def kept(out: Path, job: Job) -> NotebookGrade | None:
    """The job's grade kept by an earlier run, if its notebook file and tests are still what it was graded from."""
    fingerprint = _fingerprint(job)
    try:
        record = json.loads(_kept_path(out, job).read_text(encoding="utf-8"))
        if record.get("fingerprint") != fingerprint:
            return None
        grade = record["grade"]
        outcomes = [CaseOutcome(**{**o, "details": tuple(o["details"]), "mistakes": tuple(o.get("mistakes", ()))})
                    for o in grade.pop("outcomes")]
        return NotebookGrade(**grade, outcomes=outcomes)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):  # missing or damaged: graded again
        return None


def submitted_at(path: str | None) -> float | None:
    """When the collected file was last written (its modification time, not following a link)."""
    try:
        return None if path is None else os.lstat(path).st_mtime
    except OSError:
        return None


def stored(student: str, notebooks: list[NotebookGrade], submitted: list[float | None]) -> dict:
    """What results/<student>.json keeps of a student's grading."""
    return {"student": student, "notebooks": [
        {"notebook": g.notebook, "submitted": at, "outcomes": [dataclasses.asdict(o) for o in g.outcomes],
         "cell_errors": g.cell_errors, "notes": g.notes} for g, at in zip(notebooks, submitted)]}


OUTCOME = {"question": str, "hidden": bool, "points": files.NUMBER, "earned": files.NUMBER, "status": str, "message": str,
           "details": [str], "mistakes?": [str]}
RECORD = {"student": str, "notebooks": [{"notebook": str, "submitted": (*files.NUMBER, None), "outcomes": [OUTCOME],
                                         "cell_errors": [str], "notes?": [str]}]}  # what `stored` writes


def load_results(folder: Path) -> dict[str, dict]:
    """Every stored student's results, by name, in name order; files.BadFile names a file that is not a
    results/<student>.json as `stored` writes it, or a second file of one student."""
    results, where = {}, {}
    for path in sorted(folder.glob("*.json")):
        record = files.read(path, files.json_of(RECORD))
        if record["student"] in where:
            raise files.BadFile(f"{path}: holds the results of the student {where[record['student']]} holds already")
        results[record["student"]], where[record["student"]] = record, path
    return dict(sorted(results.items()))
