"""Grading throughput of the course kit: a synthetic class of N students, every exercise notebook.

    python -m benchmarks.course_grading [--students 10] [--workers 2] [--out benchmarks/results]
                                                                        notebooks graded per minute
    python -m benchmarks.course_grading --variants                      which hidden variants draw other points

Half the class answers with gptlib's reference solutions, half with the typical mistakes of
tests/support/course_class.py; every notebook of every student goes through the full sandbox
and judge (gptlib_course), each submission in bubblewrap (--unconfined: without it, to measure what
the confinement costs). Prints the CPU, the load average before and after, the rate, the peak
resident memory of the largest process grading started (a judge, a sandbox's zygote, a submission),
and the CPU time all of them used per notebook: on a machine shared with other work the rate falls
with the load, the CPU time much less, and cores * 60 / that time is the rate the same cores would
reach idle (judges' and zygotes' start-up included). As a yardstick measured in the same run, it
also gives that time as a multiple of the CPU time a fresh interpreter takes to `import torch` (the
median of three, before grading): a loaded or slower machine stretches both. Writes the figures, the
machine, the load and the command to course_grading.json under --out.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gptlib.__main__ import shipped_notebooks
from gptlib_course import assign
from gptlib_course.grade import grade_class
from gptlib_course.jobs import load_tests
from gptlib_course.limits import Limits
from gptlib_course.questions import questions
from gptlib_course.throughput import throughput
from tests.support import course_class

NOTEBOOKS = shipped_notebooks()


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def children_cpu() -> float:
    """CPU seconds (user + system) of every child process this one has waited for so far, and theirs."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def import_torch_cpu(repeats: int = 3) -> float:
    """The yardstick: median CPU seconds of a fresh interpreter that imports torch (one thread, as a judge)."""
    times = []
    for _ in range(repeats):
        before = children_cpu()
        subprocess.run([sys.executable, "-c", "import torch"], check=True, timeout=300,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
        times.append(children_cpu() - before)
    return statistics.median(times)


def grade_synthetic_class(students: int, workers: int, confined: bool = True, out: Path | None = None) -> None:
    with tempfile.TemporaryDirectory() as folder:
        build, subs = Path(folder) / "build", Path(folder) / "submissions"
        names = assign.build(NOTEBOOKS, build)
        for name in names:
            released = json.loads((build / "student" / name / f"{name}.ipynb").read_text())
            asked = questions(json.loads(next(p for p in NOTEBOOKS if p.stem == name).read_text()))
            answers = [course_class.code(name, asked, wrong=False), course_class.code(name, asked, wrong=True)]
            for s in range(students):
                path = subs / f"student{s:03d}" / f"{name}.ipynb"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(course_class.submission(released, answers[s % 2])))
        load = os.getloadavg()[0]
        yardstick = import_torch_cpu()
        start, used = time.monotonic(), children_cpu()
        grades = grade_class(subs, build / "autograder", build / "grades", workers=workers,
                             limits=dataclasses.replace(Limits(), confined=confined))
        seconds = time.monotonic() - start
        notebooks = sum(len(v) for v in grades.values())
        cpu = (children_cpu() - used) / notebooks
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        record = {"command": shlex.join(["python", "-m", "benchmarks.course_grading", *sys.argv[1:]]),
                  "cpu": cpu_name(), "cores": os.cpu_count(), "workers": workers, "confined": confined,
                  "load_average_before": round(load, 1), "load_average_after": round(os.getloadavg()[0], 1),
                  "students": students, "notebooks": notebooks, "wall_s": round(seconds, 1),
                  "per_minute_wall": round(60 * notebooks / seconds, 1), "cpu_s_per_notebook": round(cpu, 3),
                  "per_minute_idle_estimate": round(60 * os.cpu_count() / cpu), "import_torch_cpu_s": round(yardstick, 2),
                  "per_notebook_in_torch_imports": round(cpu / yardstick, 3), "peak_rss_mib": round(peak)}
        print(f"{cpu_name()}, {os.cpu_count()} cores, {workers} workers, {'confined' if confined else 'UNCONFINED'}; "
              f"load average {load:.1f} before, {os.getloadavg()[0]:.1f} after")
        print(f"peak resident memory of one process (judge, zygote or submission): {peak:.0f} MiB")
        print(f"{students} students x {len(names)} notebooks: {throughput(notebooks, seconds)} (wall clock); "
              f"{60 * students / seconds:.2f} students (all {len(names)} notebooks) per minute")
        print(f"CPU time of the whole grading tree: {cpu:.2f} s per notebook, so about "
              f"{60 * os.cpu_count() / cpu:.0f} notebooks per minute on {os.cpu_count()} idle cores; "
              f"{cpu / yardstick:.2f} times the CPU of a fresh `import torch` in this run ({yardstick:.2f} s)")
        for half, label in ((0, "reference solutions"), (1, "typical mistakes")):
            earned = [sum(o.earned for g in grades[s] for o in g.outcomes) for s in sorted(grades)[half::2]]
            most = sum(o.points for g in grades[sorted(grades)[half]] for o in g.outcomes)
            print(f"students with {label}: {sorted(set(earned))} of {most:g} points")
            if half == 0 and set(earned) != {most}:  # a rate of grading that failed would mean nothing
                raise SystemExit("the reference solutions did not earn every point: the grading failed")
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            (out / "course_grading.json").write_text(json.dumps(record, indent=1) + "\n")
            print(f"wrote {out / 'course_grading.json'}")


def list_variants() -> None:
    with tempfile.TemporaryDirectory() as folder:
        build = Path(folder)
        names = assign.build(NOTEBOOKS, build)
        correct = course_class.correct()
        for name in names:
            for test in load_tests(str(build / "autograder" / name)):
                if any(c.hidden for c in test.cases):
                    moves = course_class.hidden_variant_moves(build, correct, name, test.name)
                    print(f"{name}:{test.name}: hidden variant {'draws other points' if moves else 'same points as public'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=10)
    parser.add_argument("--workers", type=int, default=os.cpu_count())
    parser.add_argument("--variants", action="store_true")
    parser.add_argument("--unconfined", action="store_true", help="grade without bubblewrap (what confinement costs)")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args()
    list_variants() if args.variants else grade_synthetic_class(args.students, args.workers, not args.unconfined, args.out)


if __name__ == "__main__":
    main()
