"""Sealed concept questions: a record names no answer, and checks every answer as the questions say."""

import json
import re

import pytest

from gptlib import exercises
from gptlib.checking import FAILED, PASSED, sealed
from gptlib.exercises import concepts as concept_checks
from gptlib.exercises.answers import concepts

SALT = bytes(range(16))  # fixed: the searches below are deterministic


def _answer_and_why(spec):
    if isinstance(spec, concepts.Choice):
        return spec.answer, spec.why
    return spec.answer(), spec.why(spec.answer())


@pytest.mark.parametrize("question", list(concepts.QUESTIONS))
def test_a_record_holds_neither_the_answer_nor_its_explanation(question):
    spec = concepts.QUESTIONS[question]
    answer, why = _answer_and_why(spec)
    record = sealed.seal(question, spec, SALT)
    if isinstance(spec, concepts.Number):  # the sizes its Markdown states (an answer may equal one: 1.5's T)
        assert record.pop("asked_at") == [[name, value] for name, value in spec.asked_at.items()]
    text = json.dumps(record)
    words = set(re.split(r"[^A-Za-z0-9]+", text))
    assert why[:40] not in text
    if isinstance(spec, concepts.Choice):
        assert record["letters"] == spec.letters() and len(record["outcomes"]) == len(spec.letters())
    else:
        assert str(answer) not in words and f"{answer:,}" not in text.split('"')


@pytest.mark.parametrize("question", list(concepts.QUESTIONS))
def test_a_released_record_checks_like_the_self_study_one(question, monkeypatch):
    """Every answer the question has words for (and one it has none for) gets the same Result from a
    record sealed under another salt, as a class release's is."""
    spec = concepts.QUESTIONS[question]
    answer, why = _answer_and_why(spec)
    tries = spec.letters() + ["z", 3] if isinstance(spec, concepts.Choice) else (
        [answer, answer + 7919, "x"] + [m() for m in spec.mistakes.values()])
    before = {repr(t): exercises.check_concept(question, t) for t in tries}
    monkeypatch.setattr(concept_checks, "_RELEASED", {})
    concept_checks.load_released({question: sealed.seal(question, spec, SALT)})
    for t in tries:
        after = exercises.check_concept(question, t)
        assert (after.status, after.message, after.mistakes) == (before[repr(t)].status, before[repr(t)].message,
                                                                 before[repr(t)].mistakes)
    right = exercises.check_concept(question, answer)
    assert right.status == PASSED and why in right.message
    assert exercises.check_concept(question, tries[-1] if isinstance(spec, concepts.Choice) else "x").status == FAILED


def test_salts_make_records_differ():
    spec = concepts.QUESTIONS["5.1"]
    assert sealed.seal("5.1", spec, SALT)["outcomes"].keys().isdisjoint(sealed.seal("5.1", spec, bytes(16))["outcomes"])


def test_a_self_study_check_reuses_the_keys_sealing_derived(monkeypatch):
    """Checking an answer the record has words for derives no key again (a judge checks a class's few
    answers many times); an answer it has no words for is still derived, and still fails."""
    choice, number = concepts.QUESTIONS["5.1"], concepts.QUESTIONS["5.3"]
    monkeypatch.setattr(concept_checks, "_RELEASED", {})  # self-study: no release's records loaded in this process
    for question in ("5.1", "5.3"):
        exercises.check_concept(question, None)  # sealed here, once
    derived = []
    slow = sealed._key
    monkeypatch.setattr(sealed, "_key", lambda *a: derived.append(a) or slow(*a))
    assert exercises.check_concept("5.1", choice.answer).status == PASSED
    assert all(exercises.check_concept("5.1", letter).status == FAILED for letter in choice.wrong)
    assert exercises.check_concept("5.3", number.answer()).status == PASSED
    assert all(exercises.check_concept("5.3", m()).status == FAILED for m in number.mistakes.values())
    assert derived == []
    assert exercises.check_concept("5.3", number.answer() + 7919).status == FAILED and len(derived) == 1
