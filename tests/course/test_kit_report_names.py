"""The class report keeps every name whole and drawn, and says the same bytes for the same class: a name holding a
comma stays one student in the who-lists, a name in any script is listed as text (the heat map numbers its rows,
since no font of the picture draws every script), and two runs of `report` write identical files."""

import re
import warnings

import pytest

from gptlib_course import gradebook, report
from tests.support.course_store import BOOK, BOOK_TEXT, case, kit, snapshot, store, student, write_class

BUILD_BOOK = gradebook.parse(f"[{report.BUILD_TRACK}]\nembed = 1\nblock = 1\n")


def _build_class(names):
    """Each name a student of notebook 09: the first passes both steps, the others fail the second."""
    return {name: student(name, [case("embed", False, "passed"), case("block", False, "passed" if i == 0 else "failed")],
                          notebook=report.BUILD_TRACK) for i, name in enumerate(names)}


def test_a_name_holding_a_comma_stays_one_student_in_the_who_lists():
    page = report.page(report.analyse({**store(), "Lovelace, Ada": store()["Cy_Twombly"]}, BOOK))
    unnamed = re.search(r"failed, no mistake named</td><td class='n'>2<details class='who'><summary>who</summary>(.*?)"
                        r"</details>", page)
    assert unnamed is not None, "the group of two unnamed failures has a who-list"
    assert re.findall(r"<li>(.*?)</li>", unnamed.group(1)) == ["Cy_Twombly", "Lovelace, Ada"]


@pytest.mark.parametrize("name", ["山田太郎", "김민준", "अनन्या", "ธนากร", "Zoë 🙂"])
def test_a_name_in_any_script_is_listed_as_text_and_no_glyph_is_missing_from_the_heat_map(name):
    names = ["Ada_Lovelace", name]
    built = report.analyse(_build_class(names), BUILD_BOOK)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        page = report.page(built)
    assert not [w for w in seen if "missing from font" in str(w.message)], [str(w.message) for w in seen]
    rows = re.search(r"the heat map's rows, by number</summary><ol>(.*?)</ol>", page)
    assert rows is not None
    assert re.findall(r"<li>(.*?)</li>", rows.group(1)) == report.heat_map_order(built.questions, names)
    assert name in rows.group(1)


@pytest.mark.slow  # the kit as a command, twice: fresh interpreters
def test_two_runs_of_report_on_one_class_write_the_same_bytes(tmp_path):
    out = write_class(tmp_path / "build", {**store(), **_build_class(["山田太郎", "Zoë"])},
                      book_text=f"{BOOK_TEXT}[{report.BUILD_TRACK}]\nembed = 1\nblock = 1\n")
    first = kit("report", "--out", out, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    written = snapshot(out / "grades")
    second = kit("report", "--out", out, cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert snapshot(out / "grades") == written
    assert "Late submissions" in (out / "grades" / "report.html").read_text(encoding="utf-8")  # an SVG picture is in it
