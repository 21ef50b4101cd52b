"""The exercises sit in their notebooks as learners meet them: each checker call before the worked
answer, its committed output the untouched stub's "not attempted yet", hints and solutions behind a call."""

import re

import pytest

from tests.support import notebook_files

# (notebook, the exercise as its "✎ Your turn" heading names it, the checker call,
#  text that first appears in the worked answer the exercise must precede)
PLACEMENTS = [
    ("01", "Exercise 6", "exercises.check_head_circuits(head_circuits)", "## The two circuits of a head"),
    ("01", "Exercise 6", "exercises.check_rank_bounds(rank_bounds)", "## The two circuits of a head"),
    ("01", "Exercise 3", "exercises.check_factor_pair_dimension(factor_pair_dimension)", "So a whole family of factor pairs"),
    ("01", "Exercise 3", "exercises.check_factor_pair_dimension(factor_pair_dimension)", "block matrix multiplication"),
    ("03", "Exercise 7", "exercises.check_post_norm_jacobian(post_norm_jacobian)", "### Exercise 7: one pre-norm block"),
    ("03", "Exercise 7", "exercises.check_post_norm_statement(post_norm_statement)", "### Exercise 7: one pre-norm block"),
    ("03", "Exercise 7", "exercises.check_post_norm_jacobian(post_norm_jacobian)", 'norm="post"'),  # the post-norm block
    ("04", "Exercise 4, part 1", "exercises.check_layer_norm(project, rescale)",
     "## Step 1: centering is an orthogonal projection"),
    ("04", "Exercise 4, part 2", "exercises.check_weight_decay(predict)", "## Exercise 4: weight decay"),
    ("05", "Exercise 1 ★", "exercises.check_parameter_count(count)", "## 2 · Theorem 5.2"),
    ("05", "Exercise 1 ★", "exercises.check_parameter_table(table)", "## 2 · Theorem 5.2"),
    ("05", "Exercise 5", "exercises.check_tied_count(tied_count)", "## 3 · Exercise 5"),
    ("06", "Exercise 2 ★", "exercises.check_dependency_map(dependency_map)", "## Proof sketch"),
    ("06", "Exercise 2 ★", "exercises.check_own_model(MyGPT()", "## Proof sketch"),
    ("07", "Exercise 8", "exercises.check_training_flops(flops_per_token)", "## The table of leading costs"),
    ("07", "Exercise 8", "exercises.check_attention_takeover(takeover_T)", "## The table of leading costs"),
]


def _cells(number):
    return notebook_files.cells(notebook_files.notebook(number))


def _first(cells, text):
    hits = [i for i, cell in enumerate(cells) if text in cell.source]
    assert hits, f"no cell contains {text!r}"
    return hits[0]


@pytest.mark.parametrize("number, exercise, call, answer", PLACEMENTS)
def test_each_exercise_comes_before_its_answer_and_reads_not_attempted(number, exercise, call, answer):
    cells = _cells(number)
    i = _first(cells, call)
    assert i < _first(cells, answer)
    shown = [text for output in cells[i].outputs for text in notebook_files.texts(output)]
    assert shown and all("not attempted yet" in text for text in shown)  # every form of it, and no error
    turns = [line for cell in cells[:i] if cell.cell_type == "markdown"
             for line in cell.source.splitlines() if line.startswith("#") and "✎ Your turn" in line]
    assert turns and re.search(re.escape(exercise) + r"(?!\d)", turns[-1]), f"nearest exercise heading: {turns[-1:]}"


@pytest.mark.parametrize(
    "number, exercises", [("01", (6, 3)), ("03", (7,)), ("04", (4, 4)), ("05", (1, 5)), ("06", (2,)), ("07", (8,))]
)
def test_hints_and_solutions_wait_behind_a_commented_call(number, exercises):
    cells = _cells(number)
    hidden = [cell.source for cell in cells if "exercises.show_solution(" in cell.source]
    assert [int(n) for s in hidden for n in re.findall(r"show_solution\((\d)\)", s)] == list(exercises)
    assert all(line.lstrip().startswith("#") for s in hidden for line in s.splitlines() if "exercises." in line)


def test_the_two_starred_exercises_are_marked():
    assert any("Exercise 1 ★" in cell.source for cell in _cells("05"))
    assert any("Exercise 2 ★" in cell.source for cell in _cells("06"))
