"""The gradebook: points per case, weights, deadlines and a late policy in one file the instructor
edits (OUT/gradebook.ini, written by `assign` when absent), and the grades computed from it.

    [late]                                  the late policy of every assignment
    grace_minutes = 15                      a submission this late is on time
    penalty_per_day = 0.1                   past the grace, each started day after the deadline costs this fraction
    max_days_late = 7                       more days late than this: the assignment scores 0

    [05_gpt_and_parameter_count]            one section per assignment
    weight = 1                              its weight in the overall grade (a weighted mean of percentages)
    deadline = 2026-12-09T23:59:00+00:00    optional: ISO 8601 with its UTC offset
    parameter_count = 1, 1                  points of its public case, then of its hidden case: partial credit per case
    concept_5_1 = 1                         a question with a public case only

Grading keeps each student's outcomes (OUT/grades/results/<student>.json, with each notebook's
submission time: the collected file's modification time), so the grades, the exports and
`grade --student NAME` are recomputed from that store and this file: changing a weight or a
deadline needs no regrading. Exports (docs/teaching.md, "Gradebook"): grades.csv (every
question), canvas.csv (Canvas's gradebook import), gradescope/<assignment>.csv (Gradescope's
CSV shape). No cell starts with =, +, - or @ and no control character reaches a CSV cell or a
feedback page (`cell`, `clean`): a student's name or error text is data, never a formula.
"""

from __future__ import annotations

import configparser
import csv
import datetime as dt
import hashlib
import io
import math
import os
import re
import tempfile
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from . import files
from .jobs import assignments, load_tests, name_bytes

DEFAULT_LATE = {"grace_minutes": 15.0, "penalty_per_day": 0.1, "max_days_late": 7.0}
CASES = ("public", "hidden")


@dataclass(frozen=True)
class Assignment:
    points: dict[str, dict[str, float]]  # question -> {"public": points, "hidden": points}
    weight: float = 1.0
    deadline: dt.datetime | None = None


@dataclass(frozen=True)
class Book:
    assignments: dict[str, Assignment]
    late: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_LATE))


def _number(text: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{where} must be a number >= 0, got {text!r}")
    return value


def _deadline(text: str | None, where: str) -> dt.datetime | None:
    if text is None:
        return None
    try:
        deadline = dt.datetime.fromisoformat(text)
    except ValueError:
        deadline = None
    if deadline is None or deadline.tzinfo is None:
        raise ValueError(f"{where} must be a date and time with its UTC offset "
                         f"(2026-12-09T23:59:00+00:00), got {text!r}")
    return deadline


def parse(text: str) -> Book:
    """A gradebook's text, checked: every number finite and >= 0, every deadline with its offset."""
    parser = configparser.ConfigParser(interpolation=None, inline_comment_prefixes=("#", ";"))
    parser.optionxform = str  # question names keep their case
    parser.read_string(text)
    late = dict(DEFAULT_LATE)
    if parser.has_section("late"):
        unknown = set(parser["late"]) - set(DEFAULT_LATE)
        if unknown:
            raise ValueError(f"unknown late-policy keys {sorted(unknown)}: they are {list(DEFAULT_LATE)}")
        late.update({k: _number(v, f"late.{k}") for k, v in parser["late"].items()})
    assignments = {}
    for name in (n for n in parser.sections() if n != "late"):
        section = dict(parser[name])
        weight = _number(section.pop("weight", "1"), f"{name}.weight")
        deadline = _deadline(section.pop("deadline", None), f"{name}.deadline")
        points = {}
        for question, value in section.items():
            parts = [part.strip() for part in value.split(",")]
            if not 1 <= len(parts) <= 2:
                raise ValueError(f"{name}.{question} must be 'public points' or 'public, hidden', got {value!r}")
            points[question] = {case: _number(part, f"{name}.{question}") for case, part in zip(CASES, parts)}
        assignments[name] = Assignment(points, weight, deadline)
    if not assignments:
        raise ValueError("no assignment section ([NN_name] with its questions' points)")
    return Book(assignments, late)


def load(path: Path) -> Book:
    """The gradebook file, or files.BadFile naming it and what is wrong (not UTF-8, not INI, a rule broken)."""
    return files.read(path, parse)


def default_text(assignments: dict[str, dict[str, dict[str, float]]]) -> str:
    """The gradebook file `assign` writes: every question's cases at the points of its test files, weight 1,
    no deadline, the default late policy (each to edit)."""
    lines = ["# The class's gradebook: edit it, then run `python -m gptlib_course grade` (or `grade --student NAME`).",
             "# Grades are recomputed from this file and the stored outcomes: no regrading needed after an edit.",
             "# A question's points: its public case's, then its hidden case's (each case earns its own).",
             "# docs/teaching.md, section Gradebook.", "", "[late]",
             f"grace_minutes = {DEFAULT_LATE['grace_minutes']:g}  # this late is on time",
             f"penalty_per_day = {DEFAULT_LATE['penalty_per_day']:g}  # past the grace: per started day after the deadline",
             f"max_days_late = {DEFAULT_LATE['max_days_late']:g}  # more days late: the assignment scores 0"]
    return "\n".join(lines) + "\n" + sections(assignments)


def sections(assignments: dict[str, dict[str, dict[str, float]]]) -> str:
    """One section per assignment: weight 1, no deadline, each question's points per case."""
    lines = []
    for name, questions in assignments.items():
        lines += ["", f"[{name}]", "weight = 1", "# deadline = 2026-12-09T23:59:00+00:00"]
        lines += [f"{q} = {', '.join(f'{p:g}' for p in cases.values())}" for q, cases in questions.items()]
    return "\n".join(lines) + "\n"


# ---- what a student earned -------------------------------------------------------------------


def late_factor(book: Book, deadline: dt.datetime | None, submitted: float | None) -> tuple[float, float]:
    """(hours late, the fraction of the points kept) for a notebook handed in at `submitted` (epoch seconds)."""
    if deadline is None or submitted is None:
        return 0.0, 1.0
    late_s = submitted - deadline.timestamp()
    if late_s <= book.late["grace_minutes"] * 60:
        return max(late_s, 0.0) / 3600, 1.0
    days = math.ceil(late_s / 86400)
    if days > book.late["max_days_late"]:
        return late_s / 3600, 0.0
    return late_s / 3600, max(0.0, 1.0 - days * book.late["penalty_per_day"])


@dataclass(frozen=True)
class Score:
    questions: dict[str, float]  # question -> points earned (before the late penalty)
    earned: float  # after the late penalty
    possible: float
    hours_late: float
    kept: float  # the fraction the late policy kept
    submitted: float | None


def score(book: Book, assignment: str, notebook: dict | None) -> Score:
    """One student's score on one assignment from the stored outcomes (results/<student>.json's entry)."""
    spec = book.assignments[assignment]
    outcomes = {(o["question"], "hidden" if o["hidden"] else "public"): o for o in (notebook or {}).get("outcomes", [])}
    questions = {}
    for question, cases in spec.points.items():
        questions[question] = sum(p for case, p in cases.items()
                                  if (o := outcomes.get((question, case))) is not None and o["earned"] > 0)
    submitted = (notebook or {}).get("submitted")
    hours, kept = late_factor(book, spec.deadline, submitted)
    return Score(questions, sum(questions.values()) * kept, possible(book, assignment), hours, kept, submitted)


def possible(book: Book, assignment: str) -> float:
    return sum(p for cases in book.assignments[assignment].points.values() for p in cases.values())


def overall(book: Book, scores: dict[str, Score]) -> float:
    """The weighted mean of the assignments' percentages (0-100)."""
    weights = {a: book.assignments[a].weight for a, s in scores.items() if s.possible > 0}
    total = sum(weights.values())
    return 100 * sum(weights[a] * scores[a].earned / scores[a].possible for a in weights) / total if total else 0.0


# ---- safe text -------------------------------------------------------------------------------


def clean(text: str) -> str:
    """text without control characters (C0, C1, DEL, bidirectional and other format controls; a line break
    or tab becomes a space), a byte of a file name that was not UTF-8 (os.fsdecode's surrogate) as the text
    \\xNN, any other lone surrogate as U+FFFD."""
    kept = []
    for c in str(text):
        kind = unicodedata.category(c)
        if c in "\n\r\t":
            kept.append(" ")
        elif kind == "Cs":
            kept.append(f"\\x{ord(c) - 0xDC00:02x}" if 0xDC80 <= ord(c) <= 0xDCFF else "\ufffd")
        elif kind not in ("Cc", "Cf"):
            kept.append(c)
    return "".join(kept)


def cell(value) -> str:
    """A CSV cell a spreadsheet shows as text: clean, and never starting with =, +, - or @ (a formula)."""
    text = clean(value if isinstance(value, str) else f"{value:g}" if isinstance(value, float) else str(value))
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


def _csv(rows: list[list]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    for row in rows:
        writer.writerow([cell(v) for v in row])
    return buffer.getvalue()


def write_atomically(path: Path, text: str) -> None:
    """Write the whole file or nothing: a temporary file in the same folder, flushed to disk, renamed over
    `path` (UTF-8 whatever the locale; a folder it makes is the instructor's alone)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8", errors="backslashreplace", newline="") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def file_name(student: str) -> str:
    """A file name for a student's files: the name itself when it is plain and short, else a plain prefix and a hash."""
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", student):
        return student
    digest = hashlib.sha256(name_bytes(student)).hexdigest()[:16]
    return re.sub(r"[^A-Za-z0-9._-]", "_", clean(student))[:40].lstrip("._-") + "-" + digest


# ---- the exports -----------------------------------------------------------------------------


def _time(epoch: float | None) -> str:
    return "" if epoch is None else dt.datetime.fromtimestamp(epoch, dt.timezone.utc).isoformat(timespec="seconds")


def _lateness(hours: float) -> str:
    seconds = round(hours * 3600)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def exports(book: Book, results: dict[str, dict]) -> dict[str, str]:
    """{file name under OUT/grades: its text} for every export, from the stored results {student: results json}."""
    scores = {student: {a: score(book, a, next((n for n in data["notebooks"] if n["notebook"] == a), None))
                        for a in book.assignments} for student, data in results.items()}
    names = list(book.assignments)
    grades = [["student", *(f"{a}:{q}" for a in names for q in book.assignments[a].points),
               *(f"{a}:{part}" for a in names for part in ("late_hours", "kept", "score")), "overall_percent"]]
    for student, mine in scores.items():
        grades.append([student, *(mine[a].questions[q] for a in names for q in book.assignments[a].points),
                       *(v for a in names for v in (round(mine[a].hours_late, 2), mine[a].kept, mine[a].earned)),
                       round(overall(book, mine), 2)])
    canvas = [["Student", "ID", "SIS User ID", "SIS Login ID", "Section", *names],
              ["Points Possible", "", "", "", "", *(possible(book, a) for a in names)]]
    canvas += [[student, "", "", student, "", *(mine[a].earned for a in names)] for student, mine in scores.items()]
    files = {"grades.csv": _csv(grades), "canvas.csv": _csv(canvas)}
    for a in names:
        points = book.assignments[a].points
        rows = [["Name", "SID", "Email", "Total Score", "Max Points", "Status", "Submission Time", "Lateness (H:M:S)",
                 *(f"{q} ({sum(cases.values()):g} pts)" for q, cases in points.items())]]
        for student, mine in scores.items():
            s = mine[a]
            rows.append([student, student, "", s.earned, s.possible, "Missing" if s.submitted is None else "Graded",
                         _time(s.submitted), _lateness(s.hours_late), *(s.questions[q] for q in points)])
        files[f"gradescope/{a}.csv"] = _csv(rows)
    return files


def default_book(autograder: Path) -> Book:
    """The gradebook of the test files' own points (what `assign` writes to OUT/gradebook.ini)."""
    return parse(default_text(book_points(autograder)))


def book_points(autograder: Path) -> dict[str, dict[str, dict[str, float]]]:
    """{assignment: {question: {"public": points, "hidden": points}}} from the autograder's test files."""
    return {a.name: {t.name: {"hidden" if c.hidden else "public": c.points for c in t.cases} for t in load_tests(str(a))}
            for a in assignments(autograder)}
