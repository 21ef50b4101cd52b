"""gptlib_course grade on a synthetic class: builds the assignments, grades the set in parallel,
and checks the CSV and the feedback against what each submission deserves, which is what gptlib's
checker says for the same code in this process (tests/support/course_class.py).

Notebooks 01, 04 and 05 here (their checkers take about a second), and notebook 09's build track, whose
classes stay in the submission's process while the checkers judge their mirrors (remote_module.py), with
its hostile modules; benchmarks/course_grading.py grades all of them and measures the throughput.
"""

import csv
import dataclasses
import datetime as dt
import html
import json
import multiprocessing
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
import unicodedata
from pathlib import Path

import pytest

from gptlib import exercises
from gptlib.assignment.grader import Notebook
from gptlib_course import assign, gradebook, report, sandbox
from gptlib_course.grade import grade_class
from gptlib_course.inside import zygote
from gptlib_course.jobs import Job, load_tests
from gptlib_course.judge import ERROR_TEXT, HIDDEN_MESSAGES, Submission, _answer_names, _redacted
from gptlib_course.limits import Limits
from gptlib_course.pool import _next_job
from gptlib_course.questions import cells_to_run, questions
from gptlib_course.results import load_results
from tests.support import course_class
from tests.support.notebook_files import NOTEBOOKS

pytestmark = pytest.mark.slow  # starts processes or trains: `pytest -m slow` (not in `pytest -m unit`)

GRADED = ("01_multi_head_attention", "04_layernorm_geometry", "05_gpt_and_parameter_count")
NB05 = "05_gpt_and_parameter_count"
LIMITS = Limits(cells_s=90, call_s=5)  # a loop costs call_s per case; the checkers of 01, 04, 05 call for milliseconds
ROOT = Path(__file__).resolve().parents[2]
KIT_ENV = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'course'}"}  # `python -m gptlib_course`: this tree's


def _read(path):
    return json.loads(path.read_text())


def _write(path, notebook):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(notebook))


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("class")
    build, subs = root / "build", root / "submissions"
    assign.build([p for p in NOTEBOOKS if p.stem in GRADED], build)
    released = {name: _read(build / "student" / name / f"{name}.ipynb") for name in GRADED}
    asked = {name: questions(_read(next(p for p in NOTEBOOKS if p.stem == name))) for name in GRADED}
    codes = {student: {name: course_class.code(name, asked[name], wrong=student == "typical") for name in GRADED}
             for student in ("correct", "typical")}
    for student, answers in codes.items():
        for name in GRADED:
            _write(subs / student / f"{name}.ipynb", course_class.submission(released[name], answers[name]))
    listener = socket.create_server(("127.0.0.1", 0))
    hidden_test = str(build / "autograder" / NB05 / "tests" / "parameter_count.py")
    other = str(subs / "correct" / f"{NB05}.ipynb")
    memorised, namespace = {}, {}
    exec(course_class.CORRECT_05, namespace)

    def recording(c):
        memorised[repr(c)] = namespace["count"](c)
        return memorised[repr(c)]

    exercises.check_parameter_count(recording)  # the public points and their values: the memoriser's table
    hostile = course_class.hostile(codes["correct"][NB05], hidden_test, other, listener.getsockname()[1], memorised)
    for student, code in hostile.items():
        _write(subs / student / f"{NB05}.ipynb", course_class.submission(released[NB05], code))
    _write(subs / "deleted" / f"{NB05}.ipynb",
           course_class.submission(released[NB05], course_class.solved("rows as table") + "\n" +
                                   course_class.concept_lines(asked[NB05], wrong=False), drop_answers=True))
    (subs / "broken").mkdir()
    (subs / "broken" / f"{NB05}.ipynb").write_text("{ this is not json")
    handed_in = root / "zipped" / NB05  # a student's released folder, their notebook saved, then grader.export()
    shutil.copytree(build / "student" / NB05, handed_in)
    _write(handed_in / f"{NB05}.ipynb", course_class.submission(released[NB05], codes["correct"][NB05]))
    (subs / "zipped").mkdir()
    shutil.move(Notebook(handed_in / "tests").export(), subs / "zipped" / f"{NB05}.zip")
    _write(subs / INJECTOR / f"{NB05}.ipynb", course_class.submission(
        released[NB05], codes["correct"][NB05] + "\ndef count(c):\n    raise ValueError('\\x1b[2J\\r=HYPERLINK(1)\\x00')"))
    odd_entries(subs)
    try:
        grades = grade_class(subs, build / "autograder", build / "grades", workers=2, limits=LIMITS,
                             book=build / "gradebook.ini")
    finally:
        listener.close()
    return {"build": build, "subs": subs, "submissions": subs, "grades": grades, "codes": codes, "released": released,
            "hostile": hostile}


INJECTOR = "=cmd|' -C calc'!A0\x1b[31m"  # a folder name a spreadsheet would run and a terminal would obey
ODD_NAMES = (os.fsdecode(b"stud\xe9nt"), "x" * 251)  # a folder name that is not UTF-8, one of 251 bytes


def odd_entries(subs):
    """Entries of the class folder that are not a plain <student>/<NN_name>.ipynb."""
    correct = subs / "correct" / f"{NB05}.ipynb"
    for student in ("linker", "fifo", "copier", "twice", "device"):
        (subs / student).mkdir()
    os.symlink(correct, subs / "linker" / f"{NB05}.ipynb")  # a classmate's notebook
    os.mkfifo(subs / "fifo" / f"{NB05}.ipynb")
    if os.geteuid() == 0:  # a character device that never ends (/dev/zero's numbers)
        os.mknod(subs / "device" / f"{NB05}.ipynb", stat.S_IFCHR | 0o644, os.makedev(1, 5))
    else:
        os.symlink("/dev/zero", subs / "device" / f"{NB05}.ipynb")
    shutil.copy(correct, subs / "copier" / f"{NB05}-Copy1.ipynb")
    shutil.copy(correct, subs / "twice" / f"{NB05}.ipynb")
    shutil.copy(correct, subs / "twice" / f"{NB05}-Copy1.ipynb")
    (subs / "README.txt").write_text("not a student")
    os.symlink(subs / "correct", subs / "aliased")
    for name in ODD_NAMES:
        (subs / name).mkdir()
        shutil.copy(correct, subs / name / f"{NB05}.ipynb")


def _outcomes(graded, student, notebook):
    return next(g for g in graded["grades"][student] if g.notebook == notebook).outcomes


def _offset(case) -> int:
    return case(lambda check, seed_offset=0, functions=(): seed_offset)


@pytest.mark.parametrize("student", ["correct", "typical"])
def test_feedback_is_what_the_checker_says(graded, student):
    """Every case of every question: the verdict, message and (public) details are the checker's own
    for that code; the correct class earns every point, the typical mistakes none."""
    _assert_feedback_is_the_checkers(graded, student, GRADED)


def _assert_feedback_is_the_checkers(graded, student, names):
    for name in names:
        tests = load_tests(str(graded["build"] / "autograder" / name))
        outcomes = iter(_outcomes(graded, student, name))
        for test in tests:
            for case in test.cases:
                outcome = next(outcomes)
                expected = course_class.expected_result(graded["codes"][student][name], test.check, _offset(case))
                message = HIDDEN_MESSAGES.get(expected.status, expected.message) if case.hidden else expected.message
                assert (outcome.question, outcome.status, outcome.message) == (test.name, expected.status, message)
                assert outcome.details == (() if case.hidden else expected.details)
                assert outcome.earned == (case.points if student == "correct" else 0)
                assert bool(expected) == (student == "correct")


def _csv(path):
    with open(path, newline="", encoding="utf-8") as file:
        return list(csv.DictReader(file))


def test_grades_csv_has_a_row_per_student_and_a_column_per_question(graded):
    rows = {row["student"]: row for row in _csv(graded["build"] / "grades" / "grades.csv")}
    assert set(rows) == {gradebook.cell(s) for s in graded["grades"]}
    questions = [f"{name}:{t.name}" for name in GRADED for t in load_tests(str(graded["build"] / "autograder" / name))]
    assert list(rows["correct"])[1:1 + len(questions)] == questions
    full = {f"{name}:{t.name}": t.points for name in GRADED for t in load_tests(str(graded["build"] / "autograder" / name))}
    assert {q: float(rows["correct"][q]) for q in questions} == full
    assert sum(float(rows["correct"][f"{name}:score"]) for name in GRADED) == sum(full.values())
    assert float(rows["correct"]["overall_percent"]) == 100 and float(rows["typical"]["overall_percent"]) == 0
    for student, notebooks in graded["grades"].items():
        row = rows[gradebook.cell(student)]
        assert sum(float(row[f"{g.notebook}:score"]) for g in notebooks) == sum(o.earned for g in notebooks for o in g.outcomes)


def test_canvas_and_gradescope_exports_hold_every_student(graded):
    out = graded["build"] / "grades"
    canvas = _csv(out / "canvas.csv")
    assert list(canvas[0]) == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", *GRADED]
    assert canvas[0]["Student"] == "Points Possible"
    assert [r["Student"] for r in canvas[1:]] == [gradebook.cell(s) for s in sorted(graded["grades"])]
    for name in GRADED:
        scope = {r["Name"]: r for r in _csv(out / "gradescope" / f"{name}.csv")}
        correct = next(g for g in graded["grades"]["correct"] if g.notebook == name)
        most = sum(o.points for o in correct.outcomes)
        assert float(scope["correct"]["Total Score"]) == float(scope["correct"]["Max Points"]) == most
        stamp = dt.datetime.fromtimestamp(os.lstat(graded["submissions"] / "correct" / f"{name}.ipynb").st_mtime, dt.timezone.utc)
        assert scope["correct"]["Submission Time"] == stamp.isoformat(timespec="seconds")
        assert scope["correct"]["Status"] == "Graded" and scope["stub"]["Status"] == ("Graded" if name == NB05 else "Missing")


def test_no_formula_or_control_character_reaches_an_export_or_a_page(graded):
    out = graded["build"] / "grades"
    for path in [out / "grades.csv", out / "canvas.csv", *(out / "gradescope").glob("*.csv")]:
        with open(path, newline="", encoding="utf-8") as file:
            text = file.read()
        assert not [c for c in text.replace("\r\n", "") if unicodedata.category(c) in ("Cc", "Cf", "Cs")], path.name
        with open(path, newline="", encoding="utf-8") as file:
            assert not [c for row in csv.reader(file) for c in row if c.startswith(("=", "+", "-", "@"))], path.name
    page = (out / "feedback" / f"{gradebook.file_name(INJECTOR)}.html").read_text(encoding="utf-8")
    assert "HYPERLINK" in page and not [c for c in page.replace("\n", "") if unicodedata.category(c) in ("Cc", "Cf", "Cs")]


def test_regrading_one_student_keeps_every_other_grade_and_applies_the_late_policy(graded):
    """grade --student constant, after its notebook's file was dated two days past a deadline set in the gradebook."""
    build, subs, out = graded["build"], graded["submissions"], graded["build"] / "grades"
    others = {p: p.read_bytes() for folder in (out / "results", out / "feedback") for p in folder.iterdir()
              if not p.name.startswith("constant.")}
    deadline = dt.datetime(2026, 1, 5, 12, 0, tzinfo=dt.timezone.utc)
    book = build / "gradebook.ini"
    text = book.read_text()
    book.write_text(text.replace(f"[{NB05}]\nweight = 1\n# deadline = 2026-12-09T23:59:00+00:00",
                                 f"[{NB05}]\nweight = 1\ndeadline = {deadline.isoformat()}"))
    assert gradebook.load(book).assignments[NB05].deadline == deadline
    late = deadline.timestamp() + 2 * 86400 - 60  # two started days late
    os.utime(subs / "constant" / f"{NB05}.ipynb", (late, late))
    try:
        regraded = grade_class(subs, build / "autograder", out, workers=1, limits=LIMITS, students=["constant"], book=book)
    finally:
        book.write_text(text)
    assert list(regraded) == ["constant"]
    assert all(p.read_bytes() == content for p, content in others.items()), "another student's files changed"
    raw = sum(o.earned for g in regraded["constant"] for o in g.outcomes if g.notebook == NB05)
    kept = 1 - 2 * gradebook.DEFAULT_LATE["penalty_per_day"]
    row = {r["Name"]: r for r in _csv(out / "gradescope" / f"{NB05}.csv")}["constant"]
    assert raw > 0 and float(row["Total Score"]) == pytest.approx(raw * kept) and row["Lateness (H:M:S)"] == "47:59:00"
    rows = {r["student"]: r for r in _csv(out / "grades.csv")}
    assert set(rows) == {gradebook.cell(s) for s in graded["grades"]} and float(rows["constant"][f"{NB05}:kept"]) == kept


def _by_question(graded, student, notebook=NB05):
    found = {}
    for o in _outcomes(graded, student, notebook):
        found.setdefault(o.question, []).append(o)
    return found


def test_untouched_stubs_are_not_attempted(graded):
    check = {t.name: t.check for t in load_tests(str(graded["build"] / "autograder" / NB05))}
    stubs = "\n".join(source for _, source in cells_to_run(graded["released"][NB05]))
    for question, outcomes in _by_question(graded, "stub").items():
        expected = course_class.expected_result(stubs, check[question])
        assert expected.status == "not attempted yet"
        assert all((o.status, o.message, o.earned) == (expected.status, expected.message, 0) for o in outcomes)


def test_a_crash_zeroes_its_notebook_with_the_reason(graded):
    for outcomes in _by_question(graded, "crash").values():
        assert all(o.earned == 0 and "segmentation fault" in o.message for o in outcomes)


def test_a_loop_costs_only_its_own_question(graded):
    found = _by_question(graded, "loop")
    assert all(o.earned == 0 and f"longer than {LIMITS.call_s:g} s" in o.message for o in found["tied_count"])
    assert all(o.earned == o.points for q in ("parameter_count", "parameter_table") for o in found[q])


def test_a_flood_of_output_costs_only_the_part_that_printed_it(graded):
    found = _by_question(graded, "flood")
    public, hidden = sorted(found["parameter_count"], key=lambda o: o.hidden)
    assert public.earned == hidden.earned == 0 and "output limit" in public.message
    assert hidden.message == HIDDEN_MESSAGES["error"]  # the student's own error text: not shown for a hidden case
    assert all(o.earned == o.points for q in ("parameter_table", "tied_count") for o in found[q])


def test_the_memory_limit_costs_only_the_part_that_hit_it(graded):
    found = _by_question(graded, "hog")
    assert all(o.earned == 0 and o.status == "error" for o in found["parameter_count"])
    assert all(o.earned == o.points for q in ("parameter_table", "tied_count") for o in found[q])


def test_a_missing_import_is_named(graded):
    for outcomes in _by_question(graded, "noimport").values():
        assert all(o.earned == 0 and "ModuleNotFoundError" in o.message and "a_module_nobody_has" in o.message for o in outcomes)


def test_deleted_answer_cells_are_named(graded):
    found = _by_question(graded, "deleted")
    for question in ("parameter_count", "tied_count"):
        assert all(o.earned == 0 and "is not defined in your notebook" in o.message for o in found[question])
    assert all(o.earned == o.points for o in found["parameter_table"])


def test_an_unreadable_notebook_scores_zero_with_the_reason(graded):
    assert all(o.earned == 0 and "not a readable notebook" in o.message for os_ in _by_question(graded, "broken").values()
               for o in os_)


def test_a_submission_cannot_read_tests_or_classmates_reach_the_network_or_write_gptlib(graded):
    """The snoop's count is right only if all four attempts failed inside the sandbox, which its
    process measured as: not root, no capability, no new privileges, its zygote its namespace's PID 1."""
    for outcomes in _by_question(graded, "snoop").values():
        assert all(o.earned == o.points for o in outcomes), [o.message for o in outcomes]
    assert all(g.confinement == {"uid": 65534, "capabilities": "0000000000000000", "no_new_privs": True,
                                 "pid_namespace": True, "processes": LIMITS.processes}
               for g in graded["grades"]["snoop"] if g.notebook == NB05)


def test_patching_the_checker_in_the_notebook_changes_nothing(graded):
    found = _by_question(graded, "forger")
    assert all(o.earned == 0 and o.status == "failed" for q in ("parameter_count", "tied_count") for o in found[q])


def test_a_table_of_the_public_points_fails_the_hidden_variant(graded):
    public, hidden = sorted(_by_question(graded, "memoriser")["parameter_count"], key=lambda o: o.hidden)
    assert public.earned == public.points and hidden.earned == 0 and hidden.status == "failed"


def test_numbers_typed_for_the_public_configuration_fail_every_hidden_case(graded):
    """count = 816640, a typed table, tied_count = 808320 and Question 5.3's count answer the public case only."""
    answer = {t.name: _answer_names(t.check)[0] for t in load_tests(str(graded["build"] / "autograder" / NB05))}
    asked_elsewhere = []
    for question, outcomes in _by_question(graded, "constant").items():
        if len(outcomes) == 1:  # a choice question: public only
            continue
        asked_elsewhere.append(question)
        public, hidden = sorted(outcomes, key=lambda o: o.hidden)
        assert public.earned == public.points and hidden.earned == 0, question
        assert hidden.message.startswith(f"{answer[question]} is a value, not a function")
    assert {"parameter_count", "tied_count", "concept_5_3"} <= set(asked_elsewhere)


def test_a_hidden_case_shows_nothing_of_its_inputs_even_in_the_students_own_error(graded):
    found = _by_question(graded, "leaky")
    for question in ("parameter_count", "tied_count"):
        public, hidden = sorted(found[question], key=lambda o: o.hidden)
        assert public.status == hidden.status == "error" and "GPTConfig(" in public.message
        assert hidden.message == HIDDEN_MESSAGES["error"] and hidden.details == ()


def test_a_right_answer_of_another_type_scores_as_in_the_students_kernel(graded):
    """A Fraction, a namedtuple and a numpy integer: the checker in the test's process passes them, and so does grading."""
    code = graded["hostile"]["typed"]
    for test in load_tests(str(graded["build"] / "autograder" / NB05)):
        for case, outcome in zip(test.cases, _by_question(graded, "typed")[test.name]):
            expected = course_class.expected_result(code, test.check, _offset(case))
            assert (outcome.earned == case.points) == bool(expected), (test.name, outcome.message)
    assert all(o.earned == o.points for q in ("parameter_count", "parameter_table", "tied_count")
               for o in _by_question(graded, "typed")[q])


def test_a_zip_from_grader_export_is_graded_as_its_notebook(graded):
    assert [(o.question, o.earned) for o in _outcomes(graded, "zipped", NB05)] == [
        (o.question, o.earned) for o in _outcomes(graded, "correct", NB05)]
    assert all(o.earned == o.points for o in _outcomes(graded, "zipped", NB05))


def test_not_submitted_notebooks_score_zero(graded):
    assert all(o.earned == 0 and o.message == "not submitted" for o in _outcomes(graded, "stub", GRADED[0]))


def test_feedback_pages_name_the_mistakes_and_hide_the_hidden_tests(graded):
    pages = graded["build"] / "grades" / "feedback"
    assert sorted(p.stem for p in pages.glob("*.html")) == sorted(map(gradebook.file_name, graded["grades"]))
    secrets = []
    for name in GRADED:
        for test in load_tests(str(graded["build"] / "autograder" / name)):
            secrets += [str(_offset(c)) for c in test.cases if c.hidden]
    for student, notebooks in graded["grades"].items():
        page = (pages / f"{gradebook.file_name(student)}.html").read_text()
        text = html.unescape(re.sub(r"<[^>]+>", "", page.replace("<br>", " ")))
        assert not any(secret in page for secret in secrets), f"{student}: a hidden offset leaked"
        assert "seed_offset" not in page and "def hidden_variant" not in page
        for grade in notebooks:
            for o in grade.outcomes:
                assert gradebook.clean(o.message) in text


FULL_05 = ("correct", "snoop", "procsnoop", "signaller", "bomb", "writer", "peeker", "intenum", "twice", *ODD_NAMES)


@pytest.mark.parametrize("student", ["procsnoop", "signaller", "bomb", "writer", "peeker"])
def test_the_sandbox_holds_against_each_attempt(graded, student):
    """Each scores full points only if every attempt failed (course_class.confined says which):
    seeing another process or the zygote's memory, signalling its parent or PID 1, forking past
    its process limit, writing outside /tmp, importing or listing gptlib's reference answers."""
    for outcomes in _by_question(graded, student).values():
        assert all(o.earned == o.points for o in outcomes), [o.message for o in outcomes]


def test_the_sandbox_covers_the_folder_a_class_never_gets():
    """What the peeker found empty is gptlib's answers folder itself (assign leaves it out of the release)."""
    hidden = sandbox.hidden_paths(sandbox.python_paths())
    assert str(assign.ANSWERS.resolve()) in hidden and any(assign.ANSWERS.iterdir())


def test_a_daemon_dies_with_its_notebook(graded):
    """The daemon kills every process it can see, its own notebook's first: that notebook scores zero.
    Had it outlived its notebook, the submissions graded after it in its judge's sandbox would have
    been killed too; each of them earned its points."""
    assert all(o.earned == 0 and "ended" in o.message for os_ in _by_question(graded, "daemon").values() for o in os_)
    for student in (s for s in FULL_05 if s > "daemon"):
        assert all(o.earned == o.points for o in _outcomes(graded, student, NB05)), student


def test_answers_that_lie_are_read_as_the_values_they_hold(graded):
    enum, liar = _by_question(graded, "intenum"), _by_question(graded, "liar")
    assert all(o.earned == o.points for q in ("parameter_count", "tied_count") for o in enum[q])
    assert all(o.earned == 0 and o.status == "failed" for o in liar["parameter_count"])
    assert all(o.earned == o.points for o in liar["tied_count"])


def _reasons(graded, student):
    return {o.message for g in graded["grades"][student] for o in g.outcomes}


@pytest.mark.parametrize("student, reason", [
    ("linker", "a symbolic link: not followed"),
    ("fifo", "not a regular file (a FIFO)"),
    ("device", "a character device" if os.geteuid() == 0 else "a symbolic link"),
    ("README.txt", "not a folder"),
    ("aliased", "the student's folder is a symbolic link: not followed"),
    ("copier", f"only {NB05}-Copy1.ipynb: name it {NB05}.ipynb"),
])
def test_odd_entries_get_a_row_and_a_reason(graded, student, reason):
    assert all(o.earned == 0 for g in graded["grades"][student] for o in g.outcomes)
    assert any(reason in message for message in _reasons(graded, student)), _reasons(graded, student)


def test_a_duplicate_is_named_and_odd_names_are_graded(graded):
    twice = next(g for g in graded["grades"]["twice"] if g.notebook == NB05)
    assert twice.notes == [f"{NB05}-Copy1.ipynb was handed in too: not graded (only {NB05}.ipynb is)"]
    page = (graded["build"] / "grades" / "feedback" / "twice.html").read_text(encoding="utf-8")
    assert twice.notes[0] in page
    names = [gradebook.file_name(name) for name in ODD_NAMES]
    assert names[0].startswith("stud_xe9nt-") and len(names[1]) < 100 and len(set(names)) == 2
    for name in ODD_NAMES:
        assert all(o.earned == o.points for o in _outcomes(graded, name, NB05)), repr(name)


def test_cell_errors_are_bounded_in_total():
    submission = Submission([], LIMITS)
    for cell in range(100):
        submission._cell_error(f"cell {cell}: ValueError: " + "x" * 400)
    assert sum(len(e) for e in submission.cell_errors) <= ERROR_TEXT + 3 and len(submission.cell_errors) < 100


def test_a_rerun_keeps_what_was_graded(graded):
    """The second run regrades only the notebook whose kept grade is gone, and writes the same grades."""
    out = graded["build"] / "grades"
    kept = {p: p.stat().st_mtime_ns for p in (out / "graded").glob("*.json")}
    lost = sorted(kept)[0]
    lost.unlink()
    again = grade_class(graded["subs"], graded["build"] / "autograder", out, workers=1, limits=LIMITS)
    assert again == graded["grades"]
    assert {p: p.stat().st_mtime_ns for p in kept if p != lost} == {p: t for p, t in kept.items() if p != lost}
    assert lost.exists()


def _two_students(graded, root, sleeper: str):
    """A class of two for notebook 05: `correct`, and `sleeper`, whose cell sleeps for ten minutes."""
    subs = root / "submissions"
    (subs / "correct").mkdir(parents=True)
    shutil.copy(graded["subs"] / "correct" / f"{NB05}.ipynb", subs / "correct")
    _write(subs / sleeper / f"{NB05}.ipynb", course_class.submission(graded["released"][NB05], "import time\ntime.sleep(600)"))
    return subs


def test_a_judge_that_dies_costs_its_notebook_only(graded, tmp_path):
    """The first judge is killed while it grades the sleeper: that notebook scores zero with the
    reason, and a fresh judge grades the next one."""
    subs = _two_students(graded, tmp_path, "asleep")
    found = {}
    grading = threading.Thread(target=lambda: found.update(grades=grade_class(
        subs, graded["build"] / "autograder", tmp_path / "out", workers=1, limits=dataclasses.replace(LIMITS, cells_s=900))))
    grading.start()
    deadline = time.monotonic() + 120
    while not (judges := multiprocessing.active_children()) and time.monotonic() < deadline:
        time.sleep(0.05)
    judges[0].kill()
    grading.join(timeout=600)
    asleep, correct = (_notebook(found["grades"][s], NB05) for s in ("asleep", "correct"))
    assert all(o.earned == 0 and "the grader itself failed" in o.message for o in asleep.outcomes)
    assert all(o.earned == o.points for o in correct.outcomes)


def test_a_judge_keeps_to_one_assignment_while_it_lasts():
    """Jobs in class order (student by student): a judge takes its last job's assignment while any is
    left, else one no other judge is grading, else the first; so each assignment warms up fewer judges."""
    jobs = [Job(s, a, f"{s}/{a}.ipynb") for s in ("ann", "bob", "cy") for a in ("01", "04", "05")]
    assert _next_job(jobs, None, set()) == jobs[0]
    assert _next_job(jobs[1:], jobs[0], {"04"}) == Job("bob", "01", "bob/01.ipynb")
    assert _next_job([j for j in jobs if j.folder != "01"], jobs[0], {"04"}) == Job("ann", "05", "ann/05.ipynb")
    assert _next_job(jobs[1:2], jobs[0], {"04"}) == jobs[1]  # every assignment left is taken: share


def _notebook(grades, name):
    return next(g for g in grades if g.notebook == name)


SHUTDOWN_S = 20  # an interrupted grade kills its judges, says so and exits: seconds; the margin is the load's
# (the bug this bounds waited for the class: a cell of the class below sleeps ten minutes)


def _processes() -> dict[int, tuple[int, str, str]]:
    """Every process: pid -> (its parent's pid, its start time, its command line)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat_line = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError):
            continue  # it just ended
        fields = stat_line[stat_line.rindex(")") + 2:].split()
        found[int(entry.name)] = (int(fields[1]), fields[19], cmdline)
    return found


def _descendants(pid: int) -> dict[int, tuple[int, str, str]]:
    processes, tree = _processes(), {pid}
    grown = True
    while grown:
        below = {p for p, (parent, _, _) in processes.items() if parent in tree} - tree
        tree |= below
        grown = bool(below)
    return {p: processes[p] for p in tree - {pid} if p in processes}


def _imports_torch(pid: int) -> bool:
    """The process has begun loading torch (its memory maps torch's libraries): the imports are under way."""
    return "/torch/lib/" in Path(f"/proc/{pid}/maps").read_text()


def _a_cell_runs(pid: int) -> bool:
    """A submission's process runs: forked by a sandbox's zygote."""
    below = _descendants(pid)
    return any("inside.zygote" in cmd and "inside.zygote" in below.get(parent, (0, "", ""))[2]
               for parent, _, cmd in below.values())


def _sandbox_starts(pid: int) -> bool:
    """A judge has started bwrap (not the grader's own check that bwrap works, which it runs first)."""
    below = _descendants(pid)
    return any(cmd.startswith("bwrap") and "multiprocessing.spawn" in below.get(parent, (0, "", ""))[2]
               for parent, _, cmd in below.values())


def _kept_files(kept: Path) -> dict[Path, bytes]:
    """The grades kept (a file being written has another name until it is whole)."""
    return {p: p.read_bytes() for p in kept.glob("*.json")}


def test_sigint_and_sigterm_stop_grade_at_every_moment_and_a_rerun_resumes(graded, tmp_path):
    """`grade` is interrupted at one moment after another, each run resuming the last: while it imports,
    while it writes grades, while a judge starts its sandbox, right after a notebook is kept, while a cell
    runs. Each time it ends within SHUTDOWN_S, exit 130 (SIGINT) or 143 (SIGTERM), says "interrupted", leaves
    every grade it kept whole (valid JSON, no half-written file) and unchanged, and no process of its own
    running. Started with SIGINT ignored, as a script's background job is (CI's): it stops all the same.
    The last run grades only what is missing."""
    subs = _two_students(graded, tmp_path, "zzz")
    shutil.copytree(graded["build"] / "autograder", tmp_path / "build" / "autograder")
    kept = tmp_path / "build" / "grades" / "graded"
    command = [sys.executable, "-m", "gptlib_course", "grade", str(subs), "--out", str(tmp_path / "build"),
               "--workers", "1", "--cells-s", "900"]
    all_kept = 2 * len(GRADED)  # 4 notebooks not submitted, correct's 05 and zzz's 05 (asleep)
    moments = [(signal.SIGINT, "while it imports", _imports_torch),
               (signal.SIGTERM, "while it writes grades", lambda pid: len(_kept_files(kept)) >= 1),
               (signal.SIGINT, "while a judge starts its sandbox", _sandbox_starts),
               (signal.SIGTERM, "right after correct's notebook is kept", lambda pid: len(_kept_files(kept)) == all_kept - 1),
               (signal.SIGINT, "while a cell runs", _a_cell_runs)]
    for signum, moment, reached in moments:
        with open(tmp_path / "stderr", "w+") as stderr:
            grading = subprocess.Popen(command, stderr=stderr, env=KIT_ENV, preexec_fn=lambda: signal.signal(
                signal.SIGINT, signal.SIG_IGN))
            try:
                deadline = time.monotonic() + 300  # a loaded machine starts a sandbox in seconds, not minutes
                while not reached(grading.pid):
                    assert grading.poll() is None and time.monotonic() < deadline, f"grade never got {moment}"
                    time.sleep(0.02)
                before, ours = _kept_files(kept), _descendants(grading.pid)
                grading.send_signal(signum)
                try:
                    code = grading.wait(timeout=SHUTDOWN_S)
                except subprocess.TimeoutExpired:
                    pytest.fail(f"grade had not stopped {SHUTDOWN_S} s after {signum.name} {moment}")
            finally:
                grading.kill()
                grading.wait(timeout=60)
            stderr.seek(0)
            said = stderr.read()
        assert code == 128 + signum and "interrupted" in said, (moment, code, said)
        after = _kept_files(kept)
        assert {p: after.get(p) for p in before} == before, moment
        assert all(json.loads(text)["grade"] for text in after.values()), moment
        assert sorted(kept.glob("*")) == sorted(after), f"{moment}: a file half written is left"
        deadline = time.monotonic() + SHUTDOWN_S
        while (left := {p: v for p, v in _processes().items() if ours.get(p, (0, None))[1] == v[1]}) and \
                time.monotonic() < deadline:
            time.sleep(0.1)
        assert not left, f"{moment}: still running after grade ended: {sorted(c for _, _, c in left.values())}"
    written = _kept_files(kept)
    assert len(written) == all_kept - 1
    done = subprocess.run([*command[:-1], "1"], capture_output=True, text=True, timeout=600, env=KIT_ENV)
    assert done.returncode == 0, done.stderr
    assert {p: p.read_bytes() for p in written} == written and len(_kept_files(kept)) == all_kept
    with open(tmp_path / "build" / "grades" / "grades.csv", encoding="utf-8") as file:
        totals = {row["student"]: float(row[f"{NB05}:score"]) for row in csv.DictReader(file)}
    full = sum(o.points for o in _notebook(graded["grades"]["correct"], NB05).outcomes)
    assert totals == {"correct": full, "zzz": 0}


NB09 = "09_build_your_own_gpt"
BROKEN_STEP = {  # the hostile module of each student of notebook 09, the step it spoils and the reason's words
    "raises": ("mlp", "raised ValueError: no MLP today"),
    "loops": ("layer_norm_module", f"took longer than {LIMITS.call_s:g} s in your module's forward"),
    "reshaped": ("attention_head", "your module returned shape"),
    "untensored": ("mlp", "your module returned str"),
    "huge": ("layer_norm_module", f"Tensor of more than {zygote.REPLY_BYTES // 2**20} MiB"),
    "killer": ("multi_head_attention", "your notebook's process ended in MultiHeadAttention(...) (killed)"),
    "unreadable": ("mlp", "parameters of dtype torch.complex64, which the grader does not read"),
}


@pytest.fixture(scope="module")
def graded_09(tmp_path_factory):
    """Notebook 09 graded for a class: the reference classes, one typical mistake per step, and the hostile modules."""
    root = tmp_path_factory.mktemp("class09")
    build, subs = root / "build", root / "submissions"
    assign.build([p for p in NOTEBOOKS if p.stem == NB09], build)
    released = _read(build / "student" / NB09 / f"{NB09}.ipynb")
    asked = questions(_read(next(p for p in NOTEBOOKS if p.stem == NB09)))
    codes = {"correct": course_class.code(NB09, asked, wrong=False), "typical": course_class.code(NB09, asked, wrong=True),
             **{student: course_class.CORRECT_09 + "\n" + code for student, code in course_class.hostile_modules().items()},
             "copier": "from gptlib.exercises.answers.build import *  # the reference classes, hidden from grading"}
    for student, code in codes.items():
        _write(subs / student / f"{NB09}.ipynb", course_class.submission(released, code))
    grades = grade_class(subs, build / "autograder", build / "grades", workers=2, limits=LIMITS)
    return {"build": build, "grades": grades, "codes": {student: {NB09: code} for student, code in codes.items()}}


@pytest.mark.parametrize("student", ["correct", "typical"])
def test_notebook_09_feedback_is_what_the_checker_says(graded_09, student):
    """Each build step graded on its own: the reference classes earn every point (14), each planted mistake
    zeroes its step with the checker's own message; the classes never left the submission's process."""
    _assert_feedback_is_the_checkers(graded_09, student, [NB09])
    earned = sum(o.earned for o in _outcomes(graded_09, student, NB09))
    assert earned == (14 if student == "correct" else 0)


@pytest.mark.parametrize("student", BROKEN_STEP)
def test_a_hostile_module_costs_only_its_own_step_with_the_reason(graded_09, student):
    step, reason = BROKEN_STEP[student]
    found = _by_question(graded_09, student, NB09)
    public, hidden = sorted(found[step], key=lambda o: o.hidden)
    assert public.earned == hidden.earned == 0 and public.status in ("error", "failed") and reason in public.message
    assert hidden.message in (*HIDDEN_MESSAGES.values(), _redacted(reason)) or reason in hidden.message
    assert not re.search(r"d ?= ?\d|\(2, \d", hidden.message)  # no size of the hidden case
    assert all(o.earned == o.points for q, outcomes in found.items() if q != step for o in outcomes), found


def test_the_reference_classes_cannot_be_imported_at_grading(graded_09):
    for outcomes in _by_question(graded_09, "copier", NB09).values():
        assert all(o.earned == 0 and "is not defined in your notebook" in o.message and "ModuleNotFoundError" in o.message
                   for o in outcomes)


def test_a_module_that_lies_about_its_parameters_scores_zero_with_the_reason(graded_09):
    """The liar rewrites its process's description of every module (a parameter declared of shape (3,)): the
    judge refuses each, every step scores zero with the reason, and nothing of the lie is used."""
    for outcomes in _by_question(graded_09, "liar", NB09).values():
        assert all(o.earned == 0 and "cannot read" in o.message and "shape and dtype the module declared" in o.message
                   for o in outcomes)


KNOWN = ("correct", "typical")  # students whose code behaves in the sandbox as in this process (the others probe it)


def _planted(graded, names) -> dict:
    """{(assignment, question): {mistake id: the KNOWN students whose checker, run here on their code, named it in
    the public or the hidden case}}: what the report must count, each student once."""
    planted = {}
    for name in names:
        for test in load_tests(str(graded["build"] / "autograder" / name)):
            for student in KNOWN:
                code = graded["codes"][student][name]
                for case in test.cases:
                    for m in course_class.expected_result(code, test.check, _offset(case)).mistakes:
                        planted.setdefault((name, test.name), {}).setdefault(m, set()).add(student)
    return planted


def _without_data_uris(text: str) -> str:
    return re.sub(r"data:[^'\"]*", "", text)


@pytest.mark.parametrize("fixture, names", [("graded", GRADED), ("graded_09", [NB09])])
def test_the_class_report_counts_each_planted_mistake_once_per_student(request, tmp_path, fixture, names):
    """The report, built from the graded class's store (copied: nothing re-run), names for each question exactly
    the students whose planted mistakes the checkers name, each once however many cases named it; the CSV holds
    the same counts; the anonymised copy holds no student's name; notebook 09 gets its heat map."""
    graded = request.getfixturevalue(fixture)
    shutil.copytree(graded["build"] / "grades" / "results", tmp_path / "grades" / "results")
    book = gradebook.default_book(graded["build"] / "autograder")
    built = report.analyse(load_results(tmp_path / "grades" / "results"), book)
    planted = _planted(graded, names)
    assert sum(len(ids) for ids in planted.values()) >= (7 if fixture == "graded_09" else 6)
    assert (fixture == "graded_09") or any(question.startswith("concept_") for _, question in planted)  # wrong letters
    assert all(who == {"typical"} for ids in planted.values() for who in ids.values())
    counted = {(q.assignment, q.question): {m: set(who) & set(KNOWN) for m, who in q.mistakes.items()
                                            if set(who) & set(KNOWN)} for q in built.questions}
    assert {k: v for k, v in counted.items() if v} == planted
    assert all(len(who) == len(set(who)) for q in built.questions for who in q.mistakes.values())
    report.write(tmp_path / "grades", book)
    rows = {(r["assignment"], r["question"], r["label"]): r["students"]
            for r in _csv(tmp_path / "grades" / "report.csv") if r["group"] == "mistake"}
    assert rows == {(q.assignment, q.question, m): str(len(who)) for q in built.questions for m, who in q.mistakes.items()}
    shared = _without_data_uris((tmp_path / "grades" / "report-anonymous.html").read_text(encoding="utf-8"))
    shared += (tmp_path / "grades" / "report-anonymous.csv").read_text(encoding="utf-8")
    for student in built.students:
        shown = html.escape(gradebook.clean(student), quote=True)
        assert not re.search(rf"(?<![\w-]){re.escape(shown)}(?![\w-])", shared), student
    mine = (tmp_path / "grades" / "report.html").read_text(encoding="utf-8")
    assert all(html.escape(gradebook.clean(s), quote=True) in mine for s in built.students)
    assert ("Students by build step" in mine) == (fixture == "graded_09")
