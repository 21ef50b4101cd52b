"""What a class gets holds no answer: the released notebooks are run as a student would, on gptlib
as the student image installs it (without gptlib/exercises/answers/, and without the course kit,
gptlib_course, which they must not need), and their text, outputs, the kernel's functions and the
importable package are searched for every graded answer.

Graded answers searched for: the reference solutions' source (in the notebook and gptlib.exercises:
the analysis layer computes some graded quantities by design, cost.crossover_T for one); the value of every graded
function question at every point its public check asks, given by any function the notebook's own
cells define (notebook 05's `derived_rows` was one); each concept question's explanation, shown
only to a right answer, and Exercise 7's statement's; pointers to `concept_answer` and `show_solution`.
"""

import inspect
import json
import shutil
import textwrap

import nbformat
import pytest
import torch

import gptlib
from gptlib.exercises import hints
from gptlib.exercises.answers import build, concepts, solutions
from gptlib_course import assign
from gptlib_course.questions import questions
from tests.support.notebook_files import NOTEBOOKS

pytestmark = pytest.mark.slow  # a kernel per notebook

ASSIGNED = [p for p in NOTEBOOKS if questions(json.loads(p.read_text()))]


def _why_texts(ids) -> list[str]:
    """What each concept question says only to its right answer."""
    texts = []
    for i in ids:
        spec = concepts.SEALED[i]
        texts.append(spec.why if isinstance(spec, concepts.Choice) else spec.why(spec.answer()))
    return texts


def _solution_sources() -> list[str]:
    return [textwrap.dedent(inspect.getsource(f)).split('"""')[-1].strip()
            for part in [*solutions.SOLUTIONS.values(), *build.SOLUTIONS.values()]
            for f in part]  # each body after its docstring (notebook 09's classes: after their last docstring)


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        try:
            return torch.allclose(torch.as_tensor(a).double(), torch.as_tensor(b).double())
        except (TypeError, ValueError, RuntimeError):
            return False
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b or isinstance(a, (int, float)) and isinstance(b, (int, float)) and a == b


@pytest.fixture(scope="module")
def student_package(tmp_path_factory):
    """gptlib as the class's image has it: everything but exercises/answers/."""
    root = tmp_path_factory.mktemp("image")
    shutil.copytree(gptlib.__path__[0], root / "gptlib", ignore=shutil.ignore_patterns("answers", "__pycache__"))
    return root


@pytest.mark.parametrize("path", ASSIGNED, ids=[p.stem for p in ASSIGNED])
def test_a_released_notebook_run_as_a_student_holds_no_graded_answer(path, student_package, tmp_path, monkeypatch):
    from nbclient import NotebookClient

    assign.build([path], tmp_path)
    folder = tmp_path / "student" / path.stem
    asked = questions(json.loads(path.read_text()))
    graded = [q for q in asked if q.gradable]
    ids = [i for i in map(assign.concept_id, graded) if i]
    points = {q.name: assign._reference_points(q) for q in graded if q.functions and len(q.answers) == 1}
    torch.save(points, folder / "points.pt")
    stubs = sorted({a for q in asked for a in q.answers})
    right = {i: concepts.SEALED[i].answer if isinstance(concepts.SEALED[i], concepts.Choice)
             else concepts.SEALED[i].answer() for i in ids}
    numbers = {i: a for i, a in right.items() if isinstance(concepts.SEALED[i], concepts.Number)}
    released = nbformat.read(folder / path.name, as_version=4)
    first = nbformat.v4.new_code_cell(  # None in sys.modules: importing the course kit fails, as in the student's image
        f"import sys\nsys.modules['gptlib_course'] = None\n"
        f"import gptlib\nassert gptlib.__file__.startswith({str(student_package)!r}), gptlib.__file__")
    probe = nbformat.v4.new_code_cell(textwrap.dedent(f"""
        import types, torch, io, contextlib
        from gptlib import exercises
        points = torch.load("points.pt", weights_only=False)
        given = {{}}
        for name, f in list(globals().items()):
            if isinstance(f, types.FunctionType) and f.__module__ == "__main__" and name not in {stubs!r}:
                for question, asked in points.items():
                    for k, (args, _) in enumerate(asked):
                        try:
                            given[name, question, k] = f(*args)
                        except Exception:
                            pass
        torch.save(given, "given.pt")
        try:
            import gptlib.exercises.answers.solutions
            importable = True
        except ImportError:
            importable = False
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            for n in [*range(1, 9), *{list(hints.BUILD_HINTS)!r}]:
                exercises.show_solution(n)
        revealed = printed.getvalue() + "".join(exercises.concept_answer(i) for i in {ids!r})
        verdicts = {{i: bool(exercises.check_concept(i, a)) for i, a in {right!r}.items()}}
        from gptlib.checking import shifted_seeds
        for i, a in {numbers!r}.items():  # a number question: a function of its sizes, at the stated ones
            verdicts[i, "function"] = bool(exercises.check_concept(i, lambda *sizes, a=a: a))
            try:
                with shifted_seeds(1):  # other sizes: sealed only where the answers are, in the judge
                    exercises.check_concept(i, lambda *sizes, a=a: a)
            except ValueError as refused:
                verdicts[i, "elsewhere"] = "is asked at other sizes only where it is graded" in str(refused)
        print(importable, verdicts)
        open("revealed.txt", "w").write(revealed)
    """))
    released.cells = [first, *released.cells, probe]
    monkeypatch.setenv("PYTHONPATH", str(student_package))
    NotebookClient(released, timeout=600, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(folder)}}).execute()
    errors = [o for c in released.cells[:1] + released.cells[-1:] for o in c.get("outputs", []) if o["output_type"] == "error"]
    assert not errors, errors
    printed = "".join(o.get("text", "") for o in released.cells[-1].outputs if o["output_type"] == "stream")
    expected = {**dict.fromkeys(ids, True), **{(i, how): True for i in numbers for how in ("function", "elsewhere")}}
    assert printed.strip() == f"False {expected}"  # not importable; the sealed checks still pass, at the stated sizes
    needed_the_kit = [o for c in released.cells for o in c.get("outputs", []) if o["output_type"] == "error"
                      and "gptlib_course" in json.dumps(o)]
    assert not needed_the_kit, needed_the_kit

    released.cells = released.cells[1:-1]  # the notebook as the student has it, with its outputs
    executed = json.dumps(nbformat.writes(released))
    package, exercises_package = ("".join(p.read_text(errors="replace") for p in top.rglob("*")
                                          if p.is_file() and p.suffix in (".py", ".json", ".js"))
                                  for top in (student_package / "gptlib", student_package / "gptlib" / "exercises"))
    revealed = (folder / "revealed.txt").read_text()
    searched = ((_why_texts(ids), {"package": package}), (_solution_sources(), {"gptlib.exercises": exercises_package}))
    for texts, places in searched:
        for text in texts:
            for where, found in {"notebook": executed, "show_solution/concept_answer": revealed, **places}.items():
                assert json.dumps(text)[1:-1] not in found and text not in found, f"{where} holds {text[:60]!r}"
    assert "concept_answer(" not in executed and "show_solution(" not in executed
    given = torch.load(folder / "given.pt", weights_only=False)
    leaks = [(name, question) for (name, question, k), value in given.items() if _same(value, points[question][k][1])]
    assert not leaks, f"functions of the released notebook give graded answers: {leaks}"
