"""exercises.progress(): what has passed in this kernel, row by row, with where each exercise lives."""

import pytest

from gptlib import exercises
from gptlib.checking import result
from gptlib.exercises import hints
from gptlib.exercises.answers import build as build_solutions
from gptlib.exercises.progress import NOT_YET, PARTLY, PASSED, ROWS
from tests.support.notebook_files import NOTEBOOKS, cells


@pytest.fixture
def fresh_kernel(monkeypatch):
    monkeypatch.setattr(result, "PASSED_IN_KERNEL", set())


def status(table, what):
    return next(s for w, s, _ in table.rows if w.startswith(what))


def test_a_passing_checker_marks_its_row_and_a_failing_one_does_not(fresh_kernel):
    assert all(s == NOT_YET for _, s, _ in exercises.progress().rows)
    exercises.build_track.check_mlp(build_solutions.LayerNorm)  # fails: not an MLP
    assert status(exercises.progress(), "Build 4") == NOT_YET
    assert exercises.build_track.check_mlp(build_solutions.MLP).passed
    table = exercises.progress()
    assert status(table, "Build 4") == PASSED
    assert "1 of 16 passed" in repr(table) and "09, Step 4" in repr(table) and "passed" in table._repr_html_()


def test_a_row_needing_two_checkers_is_partly_passed_after_one(fresh_kernel):
    from gptlib.exercises.answers import solutions

    assert exercises.check_parameter_count(solutions.count).passed
    assert status(exercises.progress(), "Exercise 1 ★") == PARTLY
    assert exercises.check_parameter_table(solutions.rows).passed
    assert status(exercises.progress(), "Exercise 1 ★") == PASSED


def test_every_row_names_checkers_that_exist_and_a_section_that_exists():
    names = {name for module in (exercises, exercises.build_track) for name in dir(module)}
    parts = {"_count", "causality_verdict"}  # check_own_model's verdicts on the count and on causality
    for what, where, needed in ROWS:
        assert all(any(n in names | parts for n in alternative.split("|")) for alternative in needed), what
        number, heading = where.split(", ", 1)
        path = next(p for p in NOTEBOOKS if p.name.startswith(number + "_"))
        assert any(line.startswith("#") and heading.split(",")[0] in line
                   for cell in cells(path) if cell.cell_type == "markdown" for line in cell.source.splitlines()), where


def test_build_steps_have_progressive_hints_and_a_solution(capsys):
    for step, levels in hints.BUILD_HINTS.items():
        exercises.hint(step)
        assert f"hint 1 of {len(levels)}" in capsys.readouterr().out
        exercises.hint(step, len(levels))
        assert f"show_solution({step!r})" in capsys.readouterr().out
        exercises.show_solution(step)
        out = capsys.readouterr().out
        assert all(part.__name__ in out for part in build_solutions.SOLUTIONS[step])
    with pytest.raises(ValueError, match="build steps"):
        exercises.hint("attention")
