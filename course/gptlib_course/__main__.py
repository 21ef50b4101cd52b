"""python -m gptlib_course assign | grade | report: see gptlib_course/__init__.py and docs/teaching.md."""

from __future__ import annotations

import argparse
import importlib
import math
import sys
from pathlib import Path

from .interrupt import end_now, exit_code, raising_on_signals, stop_at_once
from .limits import Limits

if __name__ == "__main__":
    stop_at_once()  # a signal during the imports (seconds) ends the program there: nothing is started yet

from . import gradebook, report  # noqa: E402  (neither loads torch: a report or a refusal takes no second of imports)

LOADS_TORCH = {"assign": ("assign",), "grade": ("pool",)}  # what these commands import: torch, seconds
UNCONFINED = "--unconfined-i-accept-students-can-read-each-other"


def refuse(command: str, problem) -> int:
    """The kit's one error path: one line on stderr saying what is wrong (a file the kit read names itself:
    files.BadFile), exit code 2, no traceback; the command wrote nothing before it."""
    print(f"python -m gptlib_course {command}: error: {problem}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    """Run a command; Ctrl-C or SIGTERM at any moment stops it: "interrupted", exit 130 or 143 (interrupt.py)."""
    args = _arguments(argv)
    if (problem := _refused_before_imports(args)) is not None:  # bad files refused in a moment, torch unloaded
        return refuse(args.command, problem)
    for module in LOADS_TORCH.get(args.command, ()):  # seconds of imports: under stop_at_once when run as a program
        importlib.import_module(f"{__package__}.{module}")
    with raising_on_signals():
        try:
            return _command(args)
        except KeyboardInterrupt as stop:
            print("interrupted", file=sys.stderr)
            return exit_code(stop)


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m gptlib_course")
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("assign", help="build student notebooks, public and hidden tests from the exercise notebooks")
    build.add_argument("notebooks", nargs="*", type=Path, help="default: notebooks/[0-9]*.ipynb")
    build.add_argument("--out", type=Path, default=Path("build/course"))
    build.add_argument("--no-hints", dest="hints", action="store_false", help="drop the hint / show_solution cells")
    build.add_argument("--no-worked", dest="worked", action="store_false",
                       help="end each notebook after its last question (the sections that work it out are not released)")
    grade = commands.add_parser("grade", help="grade SUBMISSIONS/<student>/<NN_name>.ipynb")
    grade.add_argument("submissions", type=Path)
    grade.add_argument("--out", type=Path, default=Path("build/course"), help="the folder `assign` wrote")
    grade.add_argument("--workers", type=int, default=None, help="judges in parallel (default: one per core)")
    grade.add_argument("--cells-s", type=float, default=None, help="seconds for a notebook's cells")
    grade.add_argument("--call-s", type=float, default=None, help="seconds for one call of a student's function")
    grade.add_argument("--memory-gb", type=float, default=None, help="address space of a submission")
    grade.add_argument("--student", action="append", default=None, metavar="NAME",
                       help="regrade only this student (repeatable); the others' grades are kept")
    grade.add_argument("--gradebook", type=Path, default=None, help="points, weights, deadlines (default: OUT/gradebook.ini)")
    grade.add_argument(UNCONFINED, action="store_true",
                       help="where bubblewrap cannot confine (no bwrap, no user namespaces): run submissions as the "
                            "grading user with rlimits only, so each can read what that user reads, classmates' "
                            "notebooks and the hidden tests included")
    grade.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar on stderr")
    summary = commands.add_parser("report", help="the class report from the grading store (OUT/grades/report.html, ...)")
    summary.add_argument("--out", type=Path, default=Path("build/course"), help="the folder `assign` wrote")
    summary.add_argument("--gradebook", type=Path, default=None, help="deadlines and points (default: OUT/gradebook.ini)")
    summary.add_argument("--threshold", type=int, default=report.THRESHOLD,
                         help="the anonymised copy shows smaller groups as 'fewer than THRESHOLD'")
    return parser.parse_args(argv)


def _refused_before_imports(args: argparse.Namespace) -> str | None:
    """What is wrong with the files a command names, where that can be told without torch; None: nothing."""
    if getattr(args, "gradebook", None) is not None and not args.gradebook.exists():  # named: never the default instead
        return f"{args.gradebook}: no such gradebook"
    if args.command != "grade":
        return None
    if args.workers is not None and args.workers < 1:
        return f"--workers must be an integer >= 1, got {args.workers}"
    memory = None if args.memory_gb is None else args.memory_gb * 2**30
    given = {"cells_s": args.cells_s, "call_s": args.call_s,
             "memory": int(memory) if memory is not None and math.isfinite(memory) else memory}
    try:
        args.limits = Limits(**{name: value for name, value in given.items() if value is not None},
                             confined=not getattr(args, UNCONFINED[2:].replace("-", "_")))
    except ValueError as error:  # a time or the memory that is not a finite number > 0
        return str(error)
    if not (args.out / "autograder").is_dir():
        return f"{args.out / 'autograder'} does not exist: run `python -m gptlib_course assign --out {args.out}` first"
    if not args.submissions.is_dir():
        return f"{args.submissions} is not a folder of <student>/<NN_name>.ipynb"
    from .grade import read_class

    try:
        read_class(args.submissions.resolve(), (args.out / "autograder").resolve(), (args.out / "grades").resolve(),
                   args.student, args.gradebook or args.out / "gradebook.ini")
    except ValueError as error:  # a file refused (files.BadFile), an empty class, a student with no folder
        return str(error)
    return None


def _command(args: argparse.Namespace) -> int:
    if args.command == "assign":
        from . import assign

        notebooks = args.notebooks or sorted(Path("notebooks").glob("[0-9]*.ipynb"))
        try:
            built = assign.build(notebooks, args.out, hints=args.hints, worked=args.worked)
        except ValueError as error:  # a notebook or the gradebook refused
            return refuse(args.command, error)
        print(f"{len(built)} assignments in {args.out}: {', '.join(built)}")
        return 0
    if args.command == "report":
        book = args.gradebook or args.out / "gradebook.ini"
        try:
            loaded = gradebook.load(book) if book.exists() else gradebook.default_book(args.out / "autograder")
            written = report.write(args.out / "grades", loaded, args.threshold)
        except ValueError as error:  # a file refused (files.BadFile), no store, a bad threshold
            return refuse(args.command, error)
        print("class report: " + ", ".join(str(p) for p in written))
        return 0
    from .grade import Unconfinable
    from .throughput import throughput, timed_grade_class

    book = args.gradebook or args.out / "gradebook.ini"
    try:
        grades, seconds = timed_grade_class(args.submissions, args.out / "autograder", args.out / "grades",
                                            workers=args.workers, limits=args.limits, students=args.student, book=book,
                                            progress=args.progress)
    except Unconfinable as problem:
        return refuse(args.command, f"this machine cannot confine submissions: {problem}. Grade where it can "
                                    f"(docs/teaching.md), or pass {UNCONFINED} to grade unconfined")
    except ValueError as error:  # a file refused (files.BadFile), an empty class, a student with no folder
        return refuse(args.command, error)
    except KeyboardInterrupt as stop:  # SIGINT or SIGTERM: the judges are ended, each kept notebook stays whole
        print(f"interrupted: the notebooks graded so far are kept in {args.out / 'grades' / 'graded'}; "
              "the same command resumes", file=sys.stderr)
        return exit_code(stop)
    notebooks = sum(len(v) for v in grades.values())
    out = args.out / "grades"
    print(f"{len(grades)} students graded, {throughput(notebooks, seconds)}; {out / 'grades.csv'}, {out / 'canvas.csv'}, "
          f"{out / 'gradescope'}, feedback in {out / 'feedback'}; "
          f"`python -m gptlib_course report --out {args.out}` writes the class report")
    return 0


if __name__ == "__main__":
    code = main()
    if code > 128:  # interrupted (exit_code): the judges are ended, every kept file is whole
        end_now(code)
    sys.exit(code)
