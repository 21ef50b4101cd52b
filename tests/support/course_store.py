"""A graded class's store written by hand (no grading runs), and the kit run as a command on it.

Six students' results/<student>.json records of one assignment with a deadline (two wordings of one mistake,
a mistake named by both cases, an unnamed failure, a stub, a missing notebook, one handed in 30 hours late),
its gradebook, and `kit`, which runs `python -m gptlib_course` on this tree in a subprocess with a timeout.
"""

import datetime as dt
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from gptlib_course import gradebook

ROOT = Path(__file__).resolve().parents[2]
KIT_ENV = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'course'}"}  # `python -m gptlib_course`: this tree's
DEADLINE = dt.datetime(2026, 12, 9, 23, 59, tzinfo=dt.timezone.utc)
ODD = "<script>alert('x')</script> $\\alpha$ =SUM(A1)\x1b[31m"  # markup, mathtext, a formula and a control character
BOOK_TEXT = f"[05_count]\ndeadline = {DEADLINE.isoformat()}\ncount = 1, 1\nconcept = 1\n"
BOOK = gradebook.parse(BOOK_TEXT)


def case(question, hidden, status, mistakes=(), message="said"):
    """One stored case outcome."""
    return {"question": question, "hidden": hidden, "points": 1, "earned": 1 if status == "passed" else 0,
            "status": status, "message": message, "details": [], "mistakes": list(mistakes)}


def student(name, cases, late_hours=-1.0, submitted=True, notebook="05_count"):
    """One student's stored results: one notebook handed in late_hours after DEADLINE (or not submitted)."""
    at = DEADLINE.timestamp() + late_hours * 3600 if submitted else None
    notebooks = [{"notebook": notebook, "submitted": at, "outcomes": cases, "cell_errors": [], "notes": []}]
    return {"student": name, "notebooks": notebooks}


def store():
    """The six students' records, by name."""
    students = [
        student("Ada_Lovelace", [case("count", False, "failed", ["count-no-p"], "no P, first wording"),
                                 case("count", True, "failed", ["count-no-p"]), case("concept", False, "passed")]),
        student("Bo_Diddley", [case("count", False, "failed", ["count-no-p"], "no positional embedding: another wording"),
                               case("count", True, "passed"), case("concept", False, "failed")], late_hours=30),
        student(ODD, [case("count", False, "failed", ["count-no-p", "count-no-w-o"]),
                      case("count", True, "failed", ["count-no-w-o"]), case("concept", False, "passed")]),
        student("Cy_Twombly", [case("count", False, "failed"), case("count", True, "failed"),
                               case("concept", False, "passed")]),
        student("Di_Prima", [case("count", False, "not attempted yet"), case("count", True, "not attempted yet"),
                             case("concept", False, "not attempted yet")]),
        student("Ed_Ruscha", [case("count", False, "error"), case("count", True, "error"), case("concept", False, "error")],
                submitted=False),
    ]
    return {s["student"]: s for s in students}


def write_class(out: Path, records: dict | None = None, book_text: str = BOOK_TEXT) -> Path:
    """OUT/grades/results/<i>.json for each record (default: store()) and OUT/gradebook.ini; returns OUT."""
    results = out / "grades" / "results"
    results.mkdir(parents=True)
    for i, data in enumerate((records or store()).values()):
        (results / f"{i}.json").write_text(json.dumps(data), encoding="utf-8")
    (out / "gradebook.ini").write_text(book_text, encoding="utf-8")
    return out


def kit(*args, cwd: Path) -> subprocess.CompletedProcess:
    """`python -m gptlib_course ARGS` on this tree, in cwd; a hang fails in two minutes."""
    return subprocess.run([sys.executable, "-m", "gptlib_course", *map(str, args)], cwd=cwd, env=KIT_ENV,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def snapshot(folder: Path) -> dict[str, str]:
    """Every file and folder under `folder`: its path and the SHA-256 of its bytes (a folder: "folder")."""
    return {str(p.relative_to(folder)): "folder" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*"))}
