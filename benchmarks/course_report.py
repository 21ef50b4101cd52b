"""Build time of the class report (gptlib_course/report.py) for a large class, from a synthetic grading store.

    python -m benchmarks.course_report [--students 500] [--repeats 3] [--out benchmarks/results]

The store is the project's synthetic class made larger, written directly as store records (OUT/grades/
results/<student>.json, results.stored's shape; nothing is graded): every notebook of notebooks/ with its
own questions, one public and one hidden case each, and for each question a few stable mistake identifiers taken
from the checkers' declarations (tests/checking/test_mistake_ids.py reads the same ones). Each student
passes, makes one of those mistakes (the first ones more often), fails with none named, leaves the stub, or
does not hand in, drawn from a fixed seed; submission times spread around a deadline. Times report.write (load
the store, count, draw, write both pages and both CSVs), prints the median wall-clock and CPU seconds (on a
shared machine the wall clock grows with the load), the CPU (lscpu's model name) and the load average,
and writes course_report.json under --out.
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import json
import os
import platform
import random
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gptlib import exercises
from gptlib_course import gradebook, report
from gptlib_course.questions import questions

ROOT = Path(__file__).resolve().parents[1]
TABLES = {"gptlib.exercises.counting": "gptlib.exercises.count_differences"}  # a checker whose mistakes live elsewhere
DEADLINE = dt.datetime(2026, 12, 9, 23, 59, tzinfo=dt.timezone.utc)


def cpu_name() -> str:
    """lscpu's model name, else /proc/cpuinfo's, else what platform knows."""
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        text = ""
    for line in text.splitlines() or Path("/proc/cpuinfo").read_text().splitlines():
        if line.strip().lower().startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def declared_mistakes() -> dict[str, list[str]]:
    """{checker module: the mistake identifiers written in its source (Mistake("...", ...))}."""
    found = {}
    package = Path(exercises.__file__).parent
    for path in sorted(package.rglob("*.py")):
        module = ".".join(("gptlib", "exercises", *path.relative_to(package).with_suffix("").parts))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Mistake":
                found.setdefault(module, []).append(node.args[0].value)
    return found


def class_questions() -> dict[str, dict[str, str]]:
    """{notebook: {question: the checker module its check calls}} for every notebook of notebooks/ (some have none)."""
    asked = {}
    for p in sorted((ROOT / "notebooks").glob("[0-9]*.ipynb")):
        asked[p.stem] = {}
        for q in questions(json.loads(p.read_text(encoding="utf-8"))):
            checker = eval(q.check.split("(")[0], {"exercises": exercises})  # exercises.check_x: a name, nothing called
            asked[p.stem][q.name] = checker.__module__
    return asked


def synthetic_store(results: Path, students: int, asked: dict[str, dict[str, str]], seed: int = 0) -> gradebook.Book:
    """Write `students` store records into `results`; the gradebook they are graded against. Each question's
    mistakes are the first four its checker's module declares (none: its failures are unnamed)."""
    rng = random.Random(seed)
    ids = declared_mistakes()
    planted = {(a, q): ids.get(TABLES.get(module, module), [])[:4] for a, qs in asked.items() for q, module in qs.items()}
    results.mkdir(parents=True)
    for i in range(students):
        name = f"student-{i:04d}"
        notebooks = []
        for a, qs in asked.items():
            if rng.random() < 0.03:
                continue  # not handed in: no record, as grading keeps none for a missing notebook's student file
            outcomes = []
            for q in qs:
                draw = rng.random()
                if draw < 0.45:
                    status, named = "passed", []
                elif draw < 0.85 and planted[(a, q)]:
                    mine = planted[(a, q)]
                    status, named = "failed", [mine[min(int(rng.expovariate(1.0)), len(mine) - 1)]]
                elif draw < 0.93:  # (draw < 0.85 too where the checker names no mistake)
                    status, named = "failed", []
                elif draw < 0.97:
                    status, named = "not attempted yet", []
                else:
                    status, named = "error", []
                for hidden in (False, True):
                    outcomes.append({"question": q, "hidden": hidden, "points": 1.0,
                                     "earned": 1.0 if status == "passed" else 0.0, "status": status,
                                     "message": f"synthetic {status}", "details": [], "mistakes": named})
            submitted = DEADLINE.timestamp() + rng.gauss(-36, 30) * 3600
            notebooks.append({"notebook": a, "submitted": submitted, "outcomes": outcomes, "cell_errors": [],
                              "notes": []})
        (results / f"{name}.json").write_text(json.dumps({"student": name, "notebooks": notebooks}), encoding="utf-8")
    return gradebook.Book({a: gradebook.Assignment({q: {"public": 1.0, "hidden": 1.0} for q in qs}, deadline=DEADLINE)
                           for a, qs in asked.items()})


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.course_report")
    parser.add_argument("--students", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None, help="write course_report.json here")
    args = parser.parse_args(argv)
    asked = class_questions()
    with tempfile.TemporaryDirectory(prefix="course-report-") as folder:
        grades = Path(folder) / "grades"
        book = synthetic_store(grades / "results", args.students, asked)
        seconds, cpu = [], []
        for _ in range(args.repeats):
            start, used = time.perf_counter(), time.process_time()
            written = report.write(grades, book)
            seconds.append(time.perf_counter() - start)
            cpu.append(time.process_time() - used)
        sizes = {p.name: p.stat().st_size for p in written}
    figures = {"students": args.students, "notebooks": len(asked), "questions": sum(len(q) for q in asked.values()),
               "seconds_median": round(statistics.median(seconds), 2), "seconds": [round(s, 2) for s in seconds],
               "cpu_seconds_median": round(statistics.median(cpu), 2), "load_average": os.getloadavg(),
               "bytes": sizes, "cpu": cpu_name(), "command": shlex.join(["python", "-m", "benchmarks.course_report",
                                                                            *(argv if argv is not None else sys.argv[1:])])}
    print(f"class report for {figures['students']} students x {figures['notebooks']} notebooks "
          f"({figures['questions']} questions): {figures['seconds_median']} s (median of {args.repeats}: "
          f"{', '.join(f'{s:.2f}' for s in seconds)}; CPU {figures['cpu_seconds_median']} s) on {figures['cpu']}, "
          f"load average {figures['load_average'][0]:.1f}; "
          + ", ".join(f"{name} {size / 1e6:.1f} MB" for name, size in sizes.items()))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "course_report.json").write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
    return figures


if __name__ == "__main__":
    main()
