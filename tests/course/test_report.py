"""The class report (gptlib_course/report.py) from hand-written store records: what it counts, what each copy
shows, and that names are data. tests/course/test_grading.py builds it from the graded synthetic class and
tests/browser/test_class_report_in_chromium.py renders it in Chromium."""

import csv
import datetime as dt
import io
import json

import pytest

from gptlib_course import gradebook, report
from gptlib_course.__main__ import main

DEADLINE = dt.datetime(2026, 12, 9, 23, 59, tzinfo=dt.timezone.utc)
ODD = "<script>alert('x')</script> $\\alpha$ =SUM(A1)\x1b[31m"  # markup, mathtext, a formula and a control character
BOOK = gradebook.Book({"05_count": gradebook.Assignment({"count": {"public": 1, "hidden": 1}, "concept": {"public": 1}},
                                                        deadline=DEADLINE)})


def _case(question, hidden, status, mistakes=(), message="said"):
    return {"question": question, "hidden": hidden, "points": 1, "earned": 1 if status == "passed" else 0,
            "status": status, "message": message, "details": [], "mistakes": list(mistakes)}


def _student(name, cases, late_hours=-1.0, submitted=True):
    at = DEADLINE.timestamp() + late_hours * 3600 if submitted else None
    notebooks = [{"notebook": "05_count", "submitted": at, "outcomes": cases, "cell_errors": [], "notes": []}]
    return {"student": name, "notebooks": notebooks}


def _store():
    """Six students: two wordings of one mistake, a mistake named by both cases, a pair, an unnamed failure, a stub,
    a missing notebook, and one handed in 30 hours late."""
    students = [
        _student("Ada_Lovelace", [_case("count", False, "failed", ["count-no-p"], "no P, first wording"),
                         _case("count", True, "failed", ["count-no-p"]), _case("concept", False, "passed")]),
        _student("Bo_Diddley", [_case("count", False, "failed", ["count-no-p"], "no positional embedding: another wording"),
                        _case("count", True, "passed"), _case("concept", False, "failed")], late_hours=30),
        _student(ODD, [_case("count", False, "failed", ["count-no-p", "count-no-w-o"]),
                       _case("count", True, "failed", ["count-no-w-o"]), _case("concept", False, "passed")]),
        _student("Cy_Twombly", [_case("count", False, "failed"), _case("count", True, "failed"),
                        _case("concept", False, "passed")]),
        _student("Di_Prima", [_case("count", False, "not attempted yet"), _case("count", True, "not attempted yet"),
                        _case("concept", False, "not attempted yet")]),
        _student("Ed_Ruscha", [_case("count", False, "error"), _case("count", True, "error"), _case("concept", False, "error")],
                 submitted=False),
    ]
    return {s["student"]: s for s in students}


def _question(built, name):
    return next(q for q in built.questions if q.question == name)


def test_each_mistake_counts_once_per_student_whatever_its_wording_or_case():
    count = _question(report.analyse(_store(), BOOK), "count")
    assert count.mistakes == {"count-no-p": ["Ada_Lovelace", "Bo_Diddley", ODD], "count-no-w-o": [ODD]}  # most frequent first
    assert count.unnamed == ["Cy_Twombly"]  # bo failed with a mistake named in one case: not unnamed
    assert count.not_attempted == ["Di_Prima", "Ed_Ruscha"]
    assert count.verdicts["hidden"]["passed"] == ["Bo_Diddley"] and count.verdicts["hidden"]["not submitted"] == ["Ed_Ruscha"]
    assert {case: sum(map(len, v.values())) for case, v in count.verdicts.items()} == {"public": 6, "hidden": 6}


def test_late_days_follow_the_gradebooks_deadline_and_grace():
    late = report.analyse(_store(), BOOK).late[0]
    # 30 hours late: the second day; Ed_Ruscha handed nothing in
    assert late.days == {"Ada_Lovelace": 0, "Bo_Diddley": 2, ODD: 0, "Cy_Twombly": 0, "Di_Prima": 0}


def test_the_csv_holds_the_same_numbers_and_the_anonymised_one_hides_small_groups():
    built = report.analyse(_store(), BOOK)
    exact = list(csv.reader(io.StringIO(gradebook._csv(report.rows(built)))))
    hidden = list(csv.reader(io.StringIO(gradebook._csv(report.rows(built, anonymous=True, threshold=3)))))
    assert ["05_count", "count", "mistake", "any", "count-no-p", "3"] in exact
    assert ["05_count", "count", "mistake", "any", "count-no-w-o", "1"] in exact
    assert ["05_count", "count", "mistake", "any", "count-no-p", "3"] in hidden
    assert ["05_count", "count", "mistake", "any", "count-no-w-o", "fewer than 3"] in hidden
    assert ["05_count", "", "late", "", "day 2", "1"] in exact
    names = (*_store(), "<script")
    assert not any(name in cell for row in exact + hidden for cell in row for name in names)


def test_names_are_escaped_data_in_the_instructors_copy_and_absent_from_the_anonymised_one():
    built = report.analyse(_store(), BOOK)
    mine, shared = report.page(built), report.page(built, anonymous=True, threshold=3)
    assert "<script>" not in mine and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in mine
    assert "\x1b" not in mine and "Ada_Lovelace" in mine
    assert not [name for name in _store() if name in shared] and "alert" not in shared
    assert "fewer than 3" in shared and "day 2 1" in mine and "day 2 fewer than 3" in shared  # the late chart's text
    assert "<details" in mine and "<details" not in shared


def test_the_page_loads_nothing_from_outside():
    text = report.page(report.analyse(_store(), BOOK))
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "") and "https://" not in text
    assert "<script" not in text.replace("&lt;script", "")


def test_the_command_writes_both_copies_and_both_csvs_next_to_grades_csv(tmp_path):
    results = tmp_path / "grades" / "results"
    results.mkdir(parents=True)
    for i, data in enumerate(_store().values()):
        (results / f"{i}.json").write_text(json.dumps(data))
    (tmp_path / "gradebook.ini").write_text(
        "[05_count]\ndeadline = 2026-12-09T23:59:00+00:00\ncount = 1, 1\nconcept = 1\n")
    assert main(["report", "--out", str(tmp_path), "--threshold", "3"]) == 0
    written = {p.name for p in (tmp_path / "grades").iterdir()}
    assert {"report.html", "report-anonymous.html", "report.csv", "report-anonymous.csv"} <= written
    assert "Ada_Lovelace" not in (tmp_path / "grades" / "report-anonymous.html").read_text()


def test_a_missing_store_or_a_bad_threshold_is_named(tmp_path):
    with pytest.raises(ValueError, match="grade the class first"):
        report.write(tmp_path / "grades", BOOK)
    (tmp_path / "grades" / "results").mkdir(parents=True)
    with pytest.raises(ValueError, match="threshold"):
        report.write(tmp_path / "grades", BOOK, threshold=1)
