"""gptlib_course assign: the assignments come from the notebooks' own checker calls, in step with them.

In process, no sandbox: the questions found, the student notebook, public and hidden test files,
grader.check on the reference solutions, and whether each hidden variant moves the checker's points.
"""

import ast
import json
import os
import re
import shutil
import zipfile

import nbformat
import pytest

from gptlib import exercises
from gptlib.assignment import cases
from gptlib.assignment.grader import Notebook
from gptlib.exercises import concepts as concept_checks
from gptlib_course import assign, gradebook
from gptlib_course.jobs import load_tests
from gptlib_course.questions import ROLE_KEY, cells_to_run, questions
from tests.support import course_class
from tests.support.notebook_files import NOTEBOOKS


@pytest.fixture(autouse=True)
def _releases_stay_in_their_test(monkeypatch):
    """A Notebook("tests") loads its release's sealed concept records for the whole process, as it would
    in a student's kernel: here each test's release is forgotten when the test ends."""
    monkeypatch.setattr(concept_checks, "_RELEASED", {})


def _checker_calls(notebook: dict) -> list[str]:
    """Every `exercises.check_*(` and `build_track.check_*(` call written at the top level of the notebook's code
    cells, not commented out (read independently, by text), as `check_*` or `build_track.check_*`. A call indented
    inside the learner's own flow (notebook 09 checks the learner's GPT only once it builds) is practice, not
    a question the kit can grade."""
    lines = [line for cell in notebook["cells"] if cell["cell_type"] == "code"
             for line in "".join(cell["source"]).splitlines() if not line.startswith(("#", " ", "\t"))]
    return [call.removeprefix("exercises.") for line in lines
            for call in re.findall(r"\b((?:exercises\.(?:build_track\.)?|build_track\.)check_\w+)\(", line)]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("course")
    names = assign.build(NOTEBOOKS, out)
    return out, names


def _load(path):
    return json.loads(path.read_text())


def test_every_checker_call_is_a_question(built):
    out, names = built
    for path in NOTEBOOKS:
        notebook = _load(path)
        asked = questions(notebook)
        assert [q.check.split("(")[0].removeprefix("exercises.") for q in asked] == _checker_calls(notebook), path.name
        assert (path.stem in names) == bool(asked)
        for q in asked:
            assert (out / "student" / path.stem / "tests" / f"{q.name}.py").exists()
            assert (out / "autograder" / path.stem / "tests" / f"{q.name}.py").exists() == q.gradable


def test_student_notebook_keeps_the_answers_and_asks_the_grader(built):
    out, names = built
    for name in names:
        released = _load(out / "student" / name / f"{name}.ipynb")
        asked = questions(_load(next(p for p in NOTEBOOKS if p.stem == name)))
        assert _checker_calls(released) == [], "a checker call left in the student notebook"
        sources = ["".join(c["source"]) for c in released["cells"]]
        assert [s for s in sources if s.startswith("grader.check(")] == [f'grader.check("{q.name}")' for q in asked]
        assert all(ROLE_KEY in c["metadata"] for c in released["cells"])
        answers = {a for q in asked for a in q.answers}
        defined = set()
        for _, source in cells_to_run(released):
            tree = ast.parse(source)
            defined |= {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
            defined |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
        assert answers <= defined, f"{name}: answers defined in no cell graded: {answers - defined}"


def test_hints_and_worked_sections_are_stripped_when_asked(tmp_path):
    path = next(p for p in NOTEBOOKS if p.stem.startswith("05_"))
    assign.build([path], tmp_path, hints=False, worked=False)
    released = _load(tmp_path / "student" / path.stem / path.name)
    text = json.dumps([c["source"] for c in released["cells"]])
    assert "exercises.hint(" not in text and "show_solution(" not in text
    assert "".join(released["cells"][-1]["source"]).startswith("grader.check(")
    assign.build([path], tmp_path / "full")
    assert len(released["cells"]) < len(_load(tmp_path / "full" / "student" / path.stem / path.name)["cells"])


def test_hidden_cases_only_in_the_autograder(built):
    out, names = built
    assert os.stat(out / "autograder").st_mode & 0o077 == 0, "the autograder folder must be the instructor's only"
    for name in names:
        for test_file in (out / "student" / name / "tests").glob("*.py"):
            student = cases.load(test_file)
            assert not any(c.hidden for c in student.cases)
            graded = out / "autograder" / name / "tests" / test_file.name
            if graded.exists():
                full = cases.load(graded)
                assert full.check == student.check
                assert any(c.hidden for c in full.cases) == ((name, full.name) in LISTED | SEEDED)


def test_grader_check_runs_the_public_cases_in_the_students_namespace(built):
    out, _ = built
    tests = out / "student" / "05_gpt_and_parameter_count" / "tests"
    namespace = {}
    exec(course_class.CORRECT_05, namespace)
    report = Notebook(tests, namespace).check("parameter_count")
    assert report and report.results[0] == exercises.check_parameter_count(namespace["count"])
    assert "Hidden tests" in repr(report) and "all tests passed" not in repr(report).lower()
    typical = {}
    exec(course_class.typical()["05_gpt_and_parameter_count"], typical)
    report = Notebook(tests, typical).check("parameter_count")
    assert not report and report.results[0] == exercises.check_parameter_count(typical["count"])


def test_hidden_variant_catches_an_answer_that_replays_the_public_points(built):
    out, _ = built
    test = cases.load(out / "autograder" / "05_gpt_and_parameter_count" / "tests" / "parameter_count.py")
    offset = course_class.hidden_offset(test)
    public = course_class.calls(test.check, course_class.CORRECT_05, "count", 0)
    hidden = course_class.calls(test.check, course_class.CORRECT_05, "count", offset)
    assert repr(public[0]) == repr(hidden[0]), "the course configuration is a fixed point"
    assert {repr(a) for a in public[1:]}.isdisjoint(repr(a) for a in hidden[1:]), "the random configurations all move"
    namespace = {}
    exec(course_class.CORRECT_05, namespace)
    memorised = {repr(args[0]): namespace["count"](*args) for args in public}
    replay = f"TABLE = {memorised!r}\ndef count(c):\n    return TABLE.get(repr(c), 0)"
    assert course_class.expected_result(replay, test.check, 0)
    assert not course_class.expected_result(replay, test.check, offset)


# Every question whose answer is a function, and every number concept question (a function of its sizes):
# its hidden variant must ask at other points.
MUST_MOVE = {"01_multi_head_attention": ["head_circuits", "rank_bounds", "factor_pair_dimension", "concept_1_5"],
             "02_position_wise_mlp": ["concept_2_3"],
             "03_residual_stream_and_prenorm": ["concept_3_3"],
             "04_layernorm_geometry": ["layer_norm", "weight_decay", "concept_4_3"],
             "05_gpt_and_parameter_count": ["parameter_count", "parameter_table", "tied_count", "concept_5_3"],
             "06_causality": ["concept_6_3"],
             "07_computational_cost": ["training_flops", "attention_takeover", "concept_7_3"],
             "09_build_your_own_gpt": ["layer_norm_module", "attention_head", "multi_head_attention", "mlp", "block",
                                       "gpt", "init"],
             "10_reading_the_residual_stream": ["concept_10_3"]}
LISTED = {(notebook, question) for notebook, asked in MUST_MOVE.items() for question in asked}
SEEDED = {("03_residual_stream_and_prenorm", "post_norm_jacobian"), ("06_causality", "dependency_map")}  # slow: they move


@pytest.mark.parametrize("notebook, question", [(n, q) for n, qs in MUST_MOVE.items() for q in qs])
def test_hidden_variant_draws_other_points_and_the_reference_passes_there(built, notebook, question):
    """The checkers draw other configurations, inputs, weights, shapes or sizes under the hidden offset, and
    the reference solution (a number question's formula) passes there as on the public points."""
    asked = questions(_load(next(p for p in NOTEBOOKS if p.stem == notebook)))
    correct = {notebook: course_class.code(notebook, asked, wrong=False)}
    assert course_class.hidden_variant_moves(built[0], correct, notebook, question)
    test = cases.load(built[0] / "autograder" / notebook / "tests" / f"{question}.py")
    assert course_class.expected_result(correct[notebook], test.check, course_class.hidden_offset(test))


def test_notebook_09_is_an_assignment_graded_per_step(built):
    """The build track's seven steps (their answers are classes, built and run in the submission's process)
    are graded questions: a public and a hidden case each, in the gradebook at their points."""
    out, names = built
    notebook = "09_build_your_own_gpt"
    assert notebook in names
    tests = load_tests(str(out / "autograder" / notebook))
    assert [t.name for t in tests] == MUST_MOVE[notebook]
    assert all(sorted((c.hidden, c.points) for c in t.cases) == [(False, 1), (True, 1)] for t in tests)
    assert gradebook.load(out / "gradebook.ini").assignments[notebook].points == {
        t.name: {"public": 1, "hidden": 1} for t in tests}


def test_grader_check_runs_notebook_09_in_the_students_kernel(built):
    """The student's half needs no mirror: grader.check_all() runs the build checkers on the classes themselves."""
    out, _ = built
    report = Notebook(out / "student" / "09_build_your_own_gpt" / "tests", _namespace(course_class.CORRECT_09)).check_all()
    assert report and repr(report).splitlines()[-1].startswith("public tests: 7 of 7 points")


def _namespace(code: str) -> dict:
    namespace = {}
    exec(code, namespace)
    return namespace


def test_every_question_with_a_hidden_variant_is_listed_above(built):
    asked = {(p.stem, q.name) for p in NOTEBOOKS for q in questions(_load(p)) if assign.has_hidden_variant(q)}
    assert asked == LISTED | SEEDED


@pytest.mark.slow  # a fresh interpreter or a training run
def test_the_released_notebook_runs_and_its_grader_cells_report(built):
    """The student's notebook of 05, answered, runs top to bottom in a real kernel, and each
    grader.check cell shows the public points (what a student sees; practice questions have 0)."""
    from nbclient import NotebookClient

    out, _ = built
    folder = out / "student" / "05_gpt_and_parameter_count"
    released = json.loads((folder / "05_gpt_and_parameter_count.ipynb").read_text())
    asked = questions(_load(next(p for p in NOTEBOOKS if p.stem.startswith("05_"))))
    answers = course_class.code("05_gpt_and_parameter_count", asked, wrong=False)
    notebook = nbformat.from_dict(course_class.submission(released, answers))
    NotebookClient(notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(folder)}}).execute()
    reports = [cell for cell in notebook.cells if cell.cell_type == "code" and cell.source.startswith("grader.check(")]
    assert len(reports) == len(asked)
    for cell in reports:
        text = cell.outputs[0]["data"]["text/plain"]
        assert re.search(r": (\d) of \1 points", text) and "Hidden tests run when your notebook is graded" in text, text


def test_hidden_variant_replaces_nothing_global():
    """The offset reaches the checkers through their own seeds: torch's and random's functions stay the
    library's, and the learner's generator draws as it would outside the block."""
    import random

    import torch

    from gptlib.checking import shifted_seeds, variant_seed

    functions = (torch.manual_seed, torch.Generator, random.Random.seed)
    torch.manual_seed(3)
    outside = torch.rand(4)
    with shifted_seeds(12345):
        assert (torch.manual_seed, torch.Generator, random.Random.seed) == functions
        torch.manual_seed(3)
        assert torch.equal(torch.rand(4), outside)
        assert variant_seed(7) == 7 + 12345
    assert variant_seed(7) == 7


def test_worked_answers_are_found_by_what_they_compute_and_withheld(built):
    """Notebook 05's derived_rows (d_ff = 4d built in) gives parameter_table's answer at the course
    configuration: the release replaces its cell; the notebooks' display helpers are kept."""
    out, _ = built
    for path in NOTEBOOKS:
        notebook = _load(path)
        found = assign.worked_answers(notebook, questions(notebook))
        cells = [i for i, c in enumerate(notebook["cells"]) if "def derived_rows(" in "".join(c["source"])]
        assert found == ({cells[0]: ["derived_rows"]} if path.stem.startswith("05_") else {}), path.name
    released = json.dumps(_load(out / "student" / "05_gpt_and_parameter_count" / "05_gpt_and_parameter_count.ipynb"))
    assert "def derived_rows" not in released and "`derived_rows`) is not part of this release" in released
    assert "concept_answer(" not in released and "show_solution(" not in released


def test_check_all_reports_every_question_and_export_zips_the_saved_notebook(built, tmp_path):
    out, _ = built
    folder = tmp_path / "05_gpt_and_parameter_count"
    shutil.copytree(out / "student" / folder.name, folder)
    namespace = {}
    exec(course_class.code(folder.name, questions(_load(next(p for p in NOTEBOOKS if p.stem == folder.name))), wrong=False),
         namespace)
    report = Notebook(folder / "tests", namespace).check_all()
    names = json.loads((folder / "tests" / "questions.json").read_text())
    assert [r.test.name for r in report.reports] == names and report
    assert repr(report).splitlines()[-1].startswith(f"public tests: {len(names)} of {len(names)} points")
    target = Notebook(folder / "tests").export()
    with zipfile.ZipFile(target) as archive:
        assert archive.namelist() == [f"{folder.name}.ipynb"]
        assert archive.read(f"{folder.name}.ipynb") == (folder / f"{folder.name}.ipynb").read_bytes()
