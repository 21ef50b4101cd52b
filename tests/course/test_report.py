"""The class report (gptlib_course/report.py) from hand-written store records: what it counts, what each copy
shows, and that names are data. tests/course/test_grading.py builds it from the graded synthetic class and
tests/browser/test_class_report_in_chromium.py renders it in Chromium."""

import csv
import io
import subprocess
import sys

import pytest

from gptlib_course import gradebook, report
from gptlib_course.__main__ import main
from tests.support.course_store import BOOK, KIT_ENV, ODD, store, write_class


def _question(built, name):
    return next(q for q in built.questions if q.question == name)


def test_each_mistake_counts_once_per_student_whatever_its_wording_or_case():
    count = _question(report.analyse(store(), BOOK), "count")
    assert count.mistakes == {"count-no-p": ["Ada_Lovelace", "Bo_Diddley", ODD], "count-no-w-o": [ODD]}  # most frequent first
    assert count.unnamed == ["Cy_Twombly"]  # bo failed with a mistake named in one case: not unnamed
    assert count.not_attempted == ["Di_Prima", "Ed_Ruscha"]
    assert count.verdicts["hidden"]["passed"] == ["Bo_Diddley"] and count.verdicts["hidden"]["not submitted"] == ["Ed_Ruscha"]
    assert {case: sum(map(len, v.values())) for case, v in count.verdicts.items()} == {"public": 6, "hidden": 6}


def test_late_days_follow_the_gradebooks_deadline_and_grace():
    late = report.analyse(store(), BOOK).late[0]
    # 30 hours late: the second day; Ed_Ruscha handed nothing in
    assert late.days == {"Ada_Lovelace": 0, "Bo_Diddley": 2, ODD: 0, "Cy_Twombly": 0, "Di_Prima": 0}


def test_the_csv_holds_the_same_numbers_and_the_anonymised_one_hides_small_groups():
    built = report.analyse(store(), BOOK)
    exact = list(csv.reader(io.StringIO(gradebook._csv(report.rows(built)))))
    hidden = list(csv.reader(io.StringIO(gradebook._csv(report.rows(built, anonymous=True, threshold=3)))))
    assert ["05_count", "count", "mistake", "any", "count-no-p", "3"] in exact
    assert ["05_count", "count", "mistake", "any", "count-no-w-o", "1"] in exact
    assert ["05_count", "count", "mistake", "any", "count-no-p", "3"] in hidden
    assert ["05_count", "count", "mistake", "any", "count-no-w-o", "fewer than 3"] in hidden
    assert ["05_count", "", "late", "", "day 2", "1"] in exact
    names = (*store(), "<script")
    assert not any(name in cell for row in exact + hidden for cell in row for name in names)


def test_names_are_escaped_data_in_the_instructors_copy_and_absent_from_the_anonymised_one():
    built = report.analyse(store(), BOOK)
    mine, shared = report.page(built), report.page(built, anonymous=True, threshold=3)
    assert "<script>" not in mine and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in mine
    assert "\x1b" not in mine and "Ada_Lovelace" in mine
    assert not [name for name in store() if name in shared] and "alert" not in shared
    assert "fewer than 3" in shared and "day 2 1" in mine and "day 2 fewer than 3" in shared  # the late chart's text
    assert "<details" in mine and "<details" not in shared


def test_the_page_loads_nothing_from_outside():
    text = report.page(report.analyse(store(), BOOK))
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "") and "https://" not in text
    assert "<script" not in text.replace("&lt;script", "")


def test_the_command_writes_both_copies_and_both_csvs_next_to_grades_csv(tmp_path):
    write_class(tmp_path)
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


@pytest.mark.slow  # a fresh interpreter
def test_the_command_the_report_and_the_gradebook_load_no_torch():
    """A report, --help or a refused command takes no torch import (seconds of CPU); assign and grade load it themselves."""
    code = "import sys, gptlib_course.__main__, gptlib_course.report, gptlib_course.gradebook; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=KIT_ENV)
    assert done.returncode == 0 and done.stdout.strip() == "False", done.stderr
