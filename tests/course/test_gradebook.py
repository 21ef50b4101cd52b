"""The gradebook (course/gptlib_course/gradebook.py) on stored results written here: points per case, weights,
the late policy, the exports' columns, and text a spreadsheet or a browser cannot misread. No grading runs
(tests/course/test_grading.py grades a class and checks the same files it writes)."""

import csv
import datetime as dt
import io
import unicodedata

import pytest

from gptlib_course import feedback, gradebook

DEADLINE = dt.datetime(2026, 12, 9, 23, 59, tzinfo=dt.timezone.utc)
BOOK_TEXT = f"""
[late]
grace_minutes = 10
penalty_per_day = 0.25
max_days_late = 3

[05_count]
weight = 3
deadline = {DEADLINE.isoformat()}
parameter_count = 2, 3
concept_5_1 = 1

[01_heads]
weight = 1
rank_bounds = 1, 1
"""


def _outcome(question, hidden, passed):
    return {"question": question, "hidden": hidden, "points": 1, "earned": 1 if passed else 0,
            "status": "passed" if passed else "failed", "message": "m", "details": []}


def _result(student, late_s=None, public=True, hidden=True, concept=True):
    count = [_outcome("parameter_count", False, public), _outcome("parameter_count", True, hidden),
             _outcome("concept_5_1", False, concept)]
    submitted = None if late_s is None else DEADLINE.timestamp() + late_s
    return {"student": student, "notebooks": [
        {"notebook": "01_heads", "submitted": DEADLINE.timestamp(), "cell_errors": [],
         "outcomes": [_outcome("rank_bounds", False, True), _outcome("rank_bounds", True, False)]},
        {"notebook": "05_count", "submitted": submitted, "cell_errors": [], "outcomes": count}]}


def _rows(text):
    return list(csv.reader(io.StringIO(text)))


def test_points_per_case_weights_and_overall():
    book = gradebook.parse(BOOK_TEXT)
    full = gradebook.score(book, "05_count", _result("a", 0)["notebooks"][1])
    assert (full.questions, full.earned, full.possible, full.kept) == ({"parameter_count": 5, "concept_5_1": 1}, 6, 6, 1)
    partial = gradebook.score(book, "05_count", _result("a", 0, hidden=False)["notebooks"][1])
    assert partial.questions["parameter_count"] == 2 and partial.earned == 3  # the public case's points only
    heads = gradebook.score(book, "01_heads", _result("a", 0)["notebooks"][0])
    assert heads.earned == 1 and heads.possible == 2
    assert gradebook.overall(book, {"05_count": partial, "01_heads": heads}) == pytest.approx(100 * (3 * 3 / 6 + 1 * 1 / 2) / 4)


@pytest.mark.parametrize("late_s, kept", [(-3600, 1.0), (0, 1.0), (10 * 60, 1.0), (10 * 60 + 1, 0.75), (86400, 0.75),
                                          (86401, 0.5), (3 * 86400, 0.25), (3 * 86400 + 1, 0.0)])
def test_the_late_policy(late_s, kept):
    book = gradebook.parse(BOOK_TEXT)
    assert gradebook.late_factor(book, DEADLINE, DEADLINE.timestamp() + late_s)[1] == kept
    assert gradebook.score(book, "05_count", _result("a", late_s)["notebooks"][1]).earned == 6 * kept


def test_no_deadline_or_no_submission_costs_nothing_extra():
    book = gradebook.parse(BOOK_TEXT)
    assert gradebook.late_factor(book, None, 1e12) == (0.0, 1.0)
    missing = gradebook.score(book, "05_count", None)
    assert (missing.earned, missing.possible, missing.submitted) == (0, 6, None)


@pytest.mark.parametrize("text, rule", [
    ("[late]\ngrace_minutes = -1\n", "late.grace_minutes must be a number >= 0"),
    ("[late]\nslack = 1\n", "unknown late-policy keys"),
    ("[a]\ndeadline = 2026-12-09 23:59\n", "a.deadline must be a date and time with its UTC offset"),
    ("[a]\nq = 1, 2, 3\n", "a.q must be 'public points' or 'public, hidden'"),
    ("[a]\nq = nan\n", "a.q must be a number >= 0"),
    ("[a]\nweight = many\n", "a.weight must be a number >= 0"),
])
def test_a_gradebook_that_breaks_a_rule_names_it(text, rule):
    with pytest.raises(ValueError, match=rule):
        gradebook.parse(text)


def test_the_default_gradebook_reads_back_as_the_test_files_points():
    points = {"05_count": {"parameter_count": {"public": 1, "hidden": 1}, "concept_5_1": {"public": 1}}}
    book = gradebook.parse(gradebook.default_text(points))
    assert book.assignments["05_count"].points == points["05_count"] and book.late == gradebook.DEFAULT_LATE
    assert book.assignments["05_count"].deadline is None and book.assignments["05_count"].weight == 1


def test_exports_have_the_documented_columns():
    book = gradebook.parse(BOOK_TEXT)
    results = {"ann": _result("ann", 86401), "bob": _result("bob", None, public=False, hidden=False, concept=False)}
    files = gradebook.exports(book, results)
    assert sorted(files) == ["canvas.csv", "grades.csv", "gradescope/01_heads.csv",
                             "gradescope/05_count.csv"]
    grades = _rows(files["grades.csv"])
    assert grades[0] == ["student", "05_count:parameter_count", "05_count:concept_5_1", "01_heads:rank_bounds",
                         "05_count:late_hours", "05_count:kept", "05_count:score", "01_heads:late_hours", "01_heads:kept",
                         "01_heads:score", "overall_percent"]
    assert grades[1][:4] == ["ann", "5", "1", "1"] and grades[1][5:7] == ["0.5", "3"]
    canvas = _rows(files["canvas.csv"])
    assert canvas[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "05_count", "01_heads"]
    assert canvas[1] == ["Points Possible", "", "", "", "", "6", "2"]
    assert canvas[2] == ["ann", "", "", "ann", "", "3", "1"]
    scope = _rows(files["gradescope/05_count.csv"])
    assert scope[0] == ["Name", "SID", "Email", "Total Score", "Max Points", "Status", "Submission Time", "Lateness (H:M:S)",
                        "parameter_count (5 pts)", "concept_5_1 (1 pts)"]
    assert scope[1][:8] == ["ann", "ann", "", "3", "6", "Graded", "2026-12-10T23:59:01+00:00", "24:00:01"]
    assert scope[2][5:8] == ["Missing", "", "0:00:00"]


HOSTILE_NAMES = ["=HYPERLINK(\"http://x\")", "+1", "-2+3", "@SUM(A1)", "\x1b[2J\r\x00bell\x07", "a\u202eb\u200bc", "ok\udcff"]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_no_formula_and_no_control_character_reaches_a_csv_or_a_page(name):
    book = gradebook.parse(BOOK_TEXT)
    result = _result(name, 0)
    result["notebooks"][1]["outcomes"][0]["message"] = f"raised ValueError: {name}\r\n=cmd|'/C calc'!A0"
    result["notebooks"][1]["cell_errors"] = [f"cell 3: {name}\x1b[31m"]
    for text in gradebook.exports(book, {name: result}).values():
        for row in _rows(text):
            assert all(not c.startswith(("=", "+", "-", "@")) for c in row), row
        assert not [c for c in text.replace("\r\n", "") if unicodedata.category(c) in ("Cc", "Cf", "Cs")]
    page = feedback.page(name, result, book)
    assert not [c for c in page.replace("\n", "") if unicodedata.category(c) in ("Cc", "Cf", "Cs")]
    assert gradebook.file_name(name).isascii() and "/" not in gradebook.file_name(name)


def test_file_names_are_the_name_when_plain_and_distinct_otherwise():
    assert gradebook.file_name("ann.lee-2") == "ann.lee-2"
    odd = ["a b", "a_b", "x" * 300, "../etc", "ünï"]
    names = [gradebook.file_name(n) for n in odd]
    assert len(set(names)) == len(odd) and all(len(n) <= 60 and not n.startswith(".") for n in names)
