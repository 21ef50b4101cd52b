"""How fast a class was graded: the command's last line, and benchmarks.course_grading's figure."""

from __future__ import annotations

import time

from .grade import grade_class
from .results import NotebookGrade


def throughput(submissions: int, seconds: float) -> str:
    return f"{submissions} notebooks in {seconds:.1f} s: {60 * submissions / seconds:.1f} per minute"


def timed_grade_class(*args, **kwargs) -> tuple[dict[str, list[NotebookGrade]], float]:
    start = time.monotonic()
    return grade_class(*args, **kwargs), time.monotonic() - start
