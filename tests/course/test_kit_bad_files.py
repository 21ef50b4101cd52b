"""Every file the course kit reads, when bad, is refused in one line that names it, with exit code 2, no traceback
and nothing written or removed: the gradebook, the stored results, the autograder's question lists and the notebooks
`assign` releases, each unreadable, not UTF-8, empty, truncated or of the wrong shape; an empty class and an empty
store are refused by name. Each runs `python -m gptlib_course` as a command on a class written by hand."""

import json

import pytest

from tests.support.course_store import kit, snapshot, store, write_class

pytestmark = pytest.mark.slow  # each test runs the kit as a command: a fresh interpreter

RECORD = json.dumps(next(iter(store().values())))


def _refused(done, named: str, fault: str) -> None:
    """Exit code 2, one line on stderr naming the file and the fault, no traceback."""
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and len(lines) == 1, done.stderr
    assert named in lines[0] and fault in lines[0], lines[0]


def _put(path, data) -> None:
    """Replace `path` by these bytes or text, or by a folder (data None)."""
    if path.is_dir():
        path.rmdir()
    else:
        path.unlink(missing_ok=True)
    if data is None:
        path.mkdir()
    else:
        path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))


BAD_GRADEBOOKS = [
    ("this is not a gradebook\n", "not INI text"),
    ("[05_count]\ncount = 1, 1\n[05_count]\n", "section '05_count' already exists"),
    ("[05_count]\ncount = 1, 1\n# caf\xe9\n".encode("latin-1"), "not UTF-8"),
    ("", "empty"),
    ("[late]\ngrace_minutes = 10\n", "no assignment section"),
    ("[05_count]\ndeadline = 2026-12-09 23:59\ncount = 1\n", "05_count.deadline must be a date and time with its UTC offset"),
    (None, "cannot be read"),
]
BAD_RESULTS = [
    ("[1, 2]", "must be a JSON object, not a JSON array"),
    (RECORD[: len(RECORD) // 2], "truncated"),
    (RECORD.replace("Ada_Lovelace", "Adà").encode("latin-1"), "not UTF-8"),
    ("\n", "empty"),
    (RECORD.replace('"earned": 0', '"earned": "none"', 1), "notebooks[0].outcomes[0].earned must be a number"),
    (RECORD.replace('"notebooks"', '"notebook_list"'), "has no 'notebooks'"),
    (json.dumps(store()["Bo_Diddley"]), "holds the results of the student"),  # a second file of one student
    (None, "cannot be read"),
]


@pytest.mark.parametrize("data, fault", BAD_GRADEBOOKS)
def test_report_refuses_a_bad_gradebook_by_name(tmp_path, data, fault):
    out = write_class(tmp_path / "build")
    _put(out / "gradebook.ini", data)
    before = snapshot(tmp_path)
    _refused(kit("report", "--out", out, cwd=tmp_path), "gradebook.ini", fault)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("data, fault", BAD_RESULTS)
def test_report_refuses_a_bad_results_file_by_name(tmp_path, data, fault):
    out = write_class(tmp_path / "build")
    _put(out / "grades" / "results" / "0.json", data)
    before = snapshot(tmp_path)
    _refused(kit("report", "--out", out, cwd=tmp_path), "0.json", fault)
    assert snapshot(tmp_path) == before


def test_a_gradebook_named_but_missing_is_refused_not_replaced_by_the_default(tmp_path):
    out = write_class(tmp_path / "build")
    before = snapshot(tmp_path)
    _refused(kit("report", "--out", out, "--gradebook", "term2.ini", cwd=tmp_path), "term2.ini", "no such gradebook")
    assert snapshot(tmp_path) == before


def test_report_refuses_an_empty_store_by_name(tmp_path):
    out = write_class(tmp_path / "build")
    for path in (out / "grades" / "results").iterdir():
        path.unlink()
    before = snapshot(tmp_path)
    _refused(kit("report", "--out", out, cwd=tmp_path), "results", "holds no student's results")
    assert snapshot(tmp_path) == before


def _graded_class(tmp_path, students=("ada",)):
    """A class to grade: OUT/autograder/05_count (its question list), the store and gradebook, a folder per student."""
    out = write_class(tmp_path / "build")
    (out / "autograder" / "05_count").mkdir(parents=True)
    (out / "autograder" / "05_count" / "questions.json").write_text('["count", "concept"]\n')
    for name in students:
        (tmp_path / "class" / name).mkdir(parents=True)
    (tmp_path / "class").mkdir(exist_ok=True)
    return out


def _grade(tmp_path, out):
    return kit("grade", tmp_path / "class", "--out", out, "--no-progress", "--workers", "1", cwd=tmp_path)


@pytest.mark.parametrize("data, fault", BAD_GRADEBOOKS[::2])  # `grade` reads them as `report` does: some suffice
def test_grade_refuses_a_bad_gradebook_before_grading(tmp_path, data, fault):
    out = _graded_class(tmp_path)
    _put(out / "gradebook.ini", data)
    before = snapshot(tmp_path)
    _refused(_grade(tmp_path, out), "gradebook.ini", fault)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("flag, value, fault", [
    ("--workers", "0", "--workers must be an integer >= 1, got 0"), ("--workers", "-1", "got -1"),
    ("--cells-s", "-5", "cells_s must be a finite number > 0, got -5.0"), ("--cells-s", "nan", "cells_s must be"),
    ("--call-s", "inf", "call_s must be a finite number > 0, got inf"), ("--call-s", "0", "call_s must be"),
    ("--memory-gb", "0", "memory must be a finite number > 0, got 0"), ("--memory-gb", "nan", "memory must be"),
    ("--memory-gb", "inf", "memory must be a finite number > 0, got inf")])
def test_grade_refuses_a_limit_that_is_not_a_positive_number(tmp_path, flag, value, fault):
    """Before: --workers -1 started no judge and waited for ever; --memory-gb nan or inf raised a traceback; a
    negative or NaN time reached the judges."""
    out = _graded_class(tmp_path)
    before = snapshot(tmp_path)
    done = kit("grade", tmp_path / "class", "--out", out, "--no-progress", flag, value, cwd=tmp_path)
    _refused(done, flag.lstrip("-").split("-")[0], fault)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("data, fault", BAD_RESULTS[:3])
def test_grade_refuses_a_damaged_store_before_grading(tmp_path, data, fault):
    out = _graded_class(tmp_path)
    _put(out / "grades" / "results" / "0.json", data)
    before = snapshot(tmp_path)
    _refused(_grade(tmp_path, out), "0.json", fault)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("data, fault", [
    ('{"count": 1}', "must be a JSON array, not a JSON object"),
    ('["count", 2]', "[1] must be a string, not a number"),
    ('["count", ', "truncated"),
])
def test_grade_refuses_a_bad_question_list_by_name(tmp_path, data, fault):
    out = _graded_class(tmp_path)
    (out / "gradebook.ini").unlink()  # the default gradebook is read from the autograder's question lists
    _put(out / "autograder" / "05_count" / "questions.json", data)
    before = snapshot(tmp_path)
    _refused(_grade(tmp_path, out), "questions.json", fault)
    assert snapshot(tmp_path) == before


def test_grade_refuses_an_empty_class_by_name(tmp_path):
    out = _graded_class(tmp_path, students=())
    before = snapshot(tmp_path)
    _refused(_grade(tmp_path, out), "class", "the class folder is empty")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("data, fault", [
    ("[]", "must be a JSON object, not a JSON array"),
    ('{"cells": [{"cell_type": "code", "source": 3}]}', "cells[0].source must be a string or a JSON array"),
    (b'{"cells": []}\xff', "not UTF-8"),
])
def test_assign_refuses_a_bad_notebook_by_name_and_writes_nothing(tmp_path, data, fault):
    _put(tmp_path / "05_count.ipynb", data)
    before = snapshot(tmp_path)
    _refused(kit("assign", "05_count.ipynb", "--out", "build", cwd=tmp_path), "05_count.ipynb", fault)
    assert snapshot(tmp_path) == before
