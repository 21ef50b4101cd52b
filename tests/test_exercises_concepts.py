"""Concept questions: each right answer passes, each wrong one fails with its own reason, and in the
notebooks every question is asked in Markdown above an unanswered check (its answer off screen)."""

import re

import pytest

from gptlib import exercises
from gptlib.exercises import concepts
from gptlib.exercises.result import FAILED, NOT_ATTEMPTED, PASSED
from tests.support import notebook_files

CHOICES = [(q, spec) for q, spec in concepts.QUESTIONS.items() if isinstance(spec, concepts.Choice)]
NUMBERS = [(q, spec) for q, spec in concepts.QUESTIONS.items() if isinstance(spec, concepts.Number)]
ASKED_IN = ["01", "02", "03", "04", "05", "06", "07"]  # notebooks that ask at least three


@pytest.mark.parametrize("question, spec", CHOICES)
def test_a_choice_passes_only_for_its_letter_and_names_why_each_other_letter_fails(question, spec):
    assert exercises.check_concept(question, f" {spec.answer.upper()} ").status == PASSED
    for letter, reason in spec.wrong.items():
        verdict = exercises.check_concept(question, letter)
        assert verdict.status == FAILED and reason in verdict.message
    assert len(spec.letters()) >= 3 and spec.answer not in spec.wrong


@pytest.mark.parametrize("question, spec", NUMBERS)
def test_a_number_passes_only_for_its_value_and_names_each_typical_mistake(question, spec):
    right = spec.answer()
    assert exercises.check_concept(question, right).status == PASSED
    assert exercises.check_concept(question, float(right)).status == PASSED
    wrong = {name: mistake() for name, mistake in spec.mistakes.items()}
    assert right not in wrong.values() and len(set(wrong.values())) == len(wrong)  # each mistake is told apart
    for name, value in wrong.items():
        verdict = exercises.check_concept(question, value)
        assert verdict.status == FAILED and verdict.message.startswith(name)
    assert exercises.check_concept(question, right + 1).status == FAILED


def test_unanswered_bad_and_unknown_questions():
    question, spec = CHOICES[0]
    assert exercises.check_concept(question, None).status == NOT_ATTEMPTED
    assert "one letter of" in exercises.check_concept(question, "z").message
    assert "whole number" in exercises.check_concept(NUMBERS[0][0], "many").message
    with pytest.raises(ValueError, match="no concept question '0.9'"):
        exercises.check_concept("0.9", "a")
    assert spec.answer in exercises.concept_answer(question)


def _asked(number):
    """{question id: (the Markdown cell before its check, the check's output texts)} in one notebook."""
    cells = notebook_files.cells(notebook_files.notebook(number))
    asked = {}
    for i, cell in enumerate(cells):
        for question, answer in re.findall(r'check_concept\("([\d.]+)", (\w+)\)', cell.source):
            assert answer == "None", f"question {question} is answered in the committed notebook"
            markdown = next(c.source for c in reversed(cells[:i]) if c.cell_type == "markdown")
            asked[question] = (markdown, [t for output in cell.outputs for t in notebook_files.texts(output)])
    return asked


@pytest.mark.parametrize("number", ASKED_IN)
def test_each_notebook_asks_its_questions_above_an_unanswered_check(number):
    asked = _asked(number)
    mine = [q for q in concepts.QUESTIONS if q.split(".")[0] == str(int(number))]
    assert sorted(asked) == sorted(mine) and len(mine) >= 3
    for question, (markdown, shown) in asked.items():
        assert f"Question {question}" in markdown
        spec = concepts.QUESTIONS[question]
        if isinstance(spec, concepts.Choice):
            assert re.findall(r"^\(([a-z])\) ", markdown, re.M) == spec.letters()
        assert shown and all("not attempted yet" in text for text in shown)
