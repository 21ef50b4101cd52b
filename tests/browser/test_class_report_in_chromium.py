"""The class report (gptlib_course/report.py) opened from disk in Chromium, offline: both copies render, every
picture decodes, nothing is requested beyond the file itself, and no console error or page error occurs, even
with a student named as markup. The store is the synthetic class of benchmarks/course_report.py, smaller."""

import json

from benchmarks import course_report
from gptlib_course import report

MARKUP = "<img src=x onerror=\"document.title='pwned'\"><script>document.title='pwned'</script>"


def test_the_class_report_renders_offline_with_no_error(page, tmp_path):
    grades = tmp_path / "grades"
    book = course_report.synthetic_store(grades / "results", 40, course_report.class_questions())
    first = grades / "results" / "student-0000.json"
    record = json.loads(first.read_text())
    (grades / "results" / "markup.json").write_text(json.dumps({**record, "student": MARKUP}))
    report.write(grades, book, threshold=5)
    requests, console = [], []
    page.on("request", lambda request: requests.append(request.url))
    page.on("console", lambda message: console.append(message.text) if message.type in ("error", "warning") else None)
    for name in ("report.html", "report-anonymous.html"):
        page.goto((grades / name).as_uri(), wait_until="load", timeout=60_000)
        assert page.title() == "Class report"
        assert page.evaluate("Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)")
        assert page.locator("img").count() >= 2 and page.locator("svg").count() >= 10
        assert page.locator("h3").count() == sum(len(a.points) for a in book.assignments.values())
    assert [url for url in requests if not url.startswith(("file:", "data:"))] == []
    assert console == []
