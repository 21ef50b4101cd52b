"""The questions of an exercise notebook, read from the checker calls it already makes, and the
student's version of that notebook.

A question is one top-level statement `exercises.check_NAME(args)` (or the build track's
`build_track.check_NAME(args)`, read as `exercises.build_track.check_NAME(args)`) in a code cell. Its name is
NAME plus its constant string arguments ("parameter_count", "concept_7_1"); its check is the
call's own source; its answers are the names the call reads from the learner's namespace. A
literal None among the arguments is the answer slot of a value question (check_concept("7.1",
None)): it becomes a variable the student assigns, `answer_concept_7_1 = None`.

Student notebook: the checker calls are taken out of their cells and each is replaced by a cell
`grader.check("NAME")`; every cell is tagged with its role in cell.metadata["gptlib_course"]:
    setup    the first code cell (imports, make_deterministic): run at grading
    answer   a cell that defines an answer (the stubs): run at grading
    check    grader.check("NAME"): skipped at grading (the tests run in the judge)
    grader   the cell that makes `grader`: skipped at grading
    given    the notebook's own demonstrations: skipped at grading (they cannot be wrong, and are slow)
A cell the student adds has no tag and runs at grading, in order.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import re

ROLE_KEY = "gptlib_course"
RUN_AT_GRADING = ("setup", "answer", None)  # None: a cell the student added
GRADER_CELL = (
    "from gptlib.assignment.grader import Notebook\n\n"
    'grader = Notebook("tests")  # grader.check("NAME") runs a question\'s public tests; hidden tests run at grading'
)


@dataclasses.dataclass(frozen=True)
class Question:
    name: str  # "parameter_count"
    check: str  # "exercises.check_parameter_count(count)": the notebook's own call
    answers: tuple[str, ...]  # the learner's names the call reads
    functions: bool  # some answer is a function or class the notebook defines: a hidden variant makes sense
    gradable: bool  # every argument is a name or a constant: the judge can take it out of the sandbox (a class's
    # modules stay there, mirrored: remote_module.py)


def _checker_calls(tree: ast.Module) -> list[ast.Expr]:
    """The top-level statements `exercises.check_*(...)`, `build_track.check_*(...)` and `exercises.build_track.check_*(...)`
    of a cell; each call's function is made `exercises.[build_track.]check_*` (the name the tests run it by)."""
    found = []
    for node in tree.body:
        call = node.value if isinstance(node, ast.Expr) else None
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr.startswith("check_")):
            continue
        owner = ast.unparse(call.func.value)
        if owner in ("build_track", "exercises.build_track"):
            call.func.value = ast.Attribute(ast.Name("exercises"), "build_track")
        if owner in ("exercises", "build_track", "exercises.build_track"):
            found.append(node)
    return found


def _parse(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except SyntaxError:  # IPython magics and shell lines: no checker call is looked for there
        return None


def _defined(tree: ast.Module) -> set[str]:
    """Names a cell binds at top level: functions, classes, assignments."""
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    return names


def _defined_by_kind(notebook: dict, kind: type) -> set[str]:
    """Names of the functions (kind ast.FunctionDef) or classes (ast.ClassDef) the notebook's cells define."""
    trees = [t for _, s in code_cells(notebook) if (t := _parse(s))]
    return {node.name for tree in trees for node in tree.body if isinstance(node, kind)}


def _question_name(call: ast.Call) -> str:
    words = [call.func.attr.removeprefix("check_")]
    words += [arg.value for arg in call.args if isinstance(arg, ast.Constant) and isinstance(arg.value, str)]
    return re.sub(r"\W+", "_", "_".join(words)).strip("_")


def code_cells(notebook: dict) -> list[tuple[int, str]]:
    return [(i, "".join(cell["source"])) for i, cell in enumerate(notebook["cells"]) if cell["cell_type"] == "code"]


def _split_cell(source: str, functions: set[str], classes: set[str]) -> tuple[str, list[tuple[Question, str]]]:
    """(the cell without its checker calls, [(question, the line that assigns its slot or '')])."""
    tree = _parse(source)
    calls = _checker_calls(tree) if tree else []
    lines = source.split("\n")
    found = []
    for node in calls:
        call = node.value
        name = _question_name(call)
        slot, slot_line = f"answer_{name}", ""
        for i, arg in enumerate(call.args):
            if isinstance(arg, ast.Constant) and arg.value is None:
                call.args[i] = ast.Name(slot)
                tail = _without_answer_pointer(lines[node.end_lineno - 1][node.end_col_offset:].strip())
                slot_line = f"{slot} = None" + (f"  {tail}" if tail.startswith("#") else "")
        arguments = [*call.args, *(k.value for k in call.keywords)]
        answers = tuple(dict.fromkeys(a.id for a in arguments if isinstance(a, ast.Name)))
        gradable = all(isinstance(a, (ast.Name, ast.Constant)) for a in arguments)
        question = Question(name, ast.unparse(call), answers, bool(set(answers) & (functions | classes)), gradable)
        found.append((question, slot_line))
    for node in reversed(calls):
        del lines[node.lineno - 1:node.end_lineno]
    return "\n".join(lines).strip("\n"), found


def questions(notebook: dict) -> list[Question]:
    """The notebook's questions, in order (names made unique by a suffix where a checker repeats)."""
    kinds = _defined_by_kind(notebook, ast.FunctionDef), _defined_by_kind(notebook, ast.ClassDef)
    found = [q for _, source in code_cells(notebook) for q, _ in _split_cell(source, *kinds)[1]]
    seen: dict[str, int] = {}
    unique = []
    for q in found:
        seen[q.name] = seen.get(q.name, 0) + 1
        unique.append(q if seen[q.name] == 1 else dataclasses.replace(q, name=f"{q.name}_{seen[q.name]}"))
    return unique


def _without_answer_pointer(comment: str) -> str:
    """A slot's comment without its pointer to the answer ("; stuck? exercises.concept_answer(...)"): the
    released notebook asks, the answers stay with the instructor."""
    return re.sub(r"[;,]?\s*stuck\?\s*exercises\.concept_answer\([^)]*\)", "", comment).rstrip()


def _without_solution_lines(source: str) -> str:
    """A hint cell, or a Markdown cell, without its show_solution lines (a class release has no reference solutions)."""
    return "\n".join(line for line in source.split("\n") if "show_solution(" not in line)


def _is_hint_cell(source: str) -> bool:
    """A cell of commented-out hint and solution calls only."""
    lines = [line.strip() for line in source.splitlines() if line.strip()]
    hinted = "exercises.hint" in source or "show_solution" in source
    return bool(lines) and all(line.startswith("#") for line in lines) and hinted


def _cell(source: str, role: str) -> dict:
    return {"cell_type": "code", "execution_count": None, "metadata": {ROLE_KEY: {"role": role}}, "outputs": [],
            "source": source}


WITHHELD_CELL = "*A worked answer to a graded question (`{names}`) is not part of this release.*"


def student_notebook(notebook: dict, hints: bool = True, worked: bool = True,
                     withheld: dict[int, list[str]] | None = None) -> dict:
    """The notebook as released: checker calls replaced by grader.check cells, every cell tagged.
    The hint cells keep their hints and lose their show_solution lines (a Markdown line naming it goes too);
    hints=False drops them;
    worked=False ends the notebook after its last question (the sections that work the exercises out
    are not released). withheld: {index of a cell: the functions in it that answer a graded question}:
    each such cell becomes a Markdown line saying so (assign.worked_answers finds them)."""
    names = iter(q.name for q in questions(notebook))
    kinds = _defined_by_kind(notebook, ast.FunctionDef), _defined_by_kind(notebook, ast.ClassDef)
    answer_names = {a for q in questions(notebook) for a in q.answers}
    cells, first_code, last_check = [], True, 0
    for index, cell in enumerate(notebook["cells"]):
        cell = copy.deepcopy(cell)
        if index in (withheld or {}):
            cells.append({"cell_type": "markdown", "metadata": {ROLE_KEY: {"role": "given"}},
                          "source": WITHHELD_CELL.format(names="`, `".join(withheld[index]))})
            continue
        if cell["cell_type"] != "code":
            cell.setdefault("metadata", {})[ROLE_KEY] = {"role": "given"}
            if cell["cell_type"] == "markdown":
                cell["source"] = _without_solution_lines("".join(cell["source"]))
            cells.append(cell)
            continue
        source = "".join(cell["source"])
        if _is_hint_cell(source):
            source = _without_solution_lines(source) if hints else ""
            if not source.strip("\n #"):
                continue
        rest, found = _split_cell(source, *kinds)
        rest = "\n".join([rest, *(line for _, line in found if line)]).strip("\n")
        tree = _parse(rest)
        defines_answer = bool(tree and _defined(tree) & (answer_names | {f"answer_{q.name}" for q, _ in found}))
        role = "setup" if first_code else "answer" if found and rest or defines_answer else "given"
        if rest:
            cell["metadata"][ROLE_KEY] = {"role": role}
            if role == "answer":
                cell["outputs"], cell["execution_count"] = [], None
            cell["source"] = rest
            cells.append(cell)
        if first_code:
            cells.append(_cell(GRADER_CELL, "grader"))
            first_code = False
        for _ in found:
            cells.append(_cell(f'grader.check("{next(names)}")', "check"))
            last_check = len(cells)
    if not worked:
        cells = cells[:last_check]
    for i, cell in enumerate(cells):  # the cells added here need an id (nbformat 4.5), unique in the notebook
        cell.setdefault("id", f"gptlib-course-{i}")
    return {**notebook, "cells": cells}


def cells_to_run(notebook: dict) -> list[tuple[int, str]]:
    """The code cells grading runs, as (index in the notebook, source): setup, answers, the student's own."""
    return [(i, source) for i, source in code_cells(notebook)
            if notebook["cells"][i].get("metadata", {}).get(ROLE_KEY, {}).get("role") in RUN_AT_GRADING]
