"""Concept questions checked without holding their answers (checking/sealed.py seals them).

    exercises.check_concept("7.1", "b")   # passed, with the reason; or failed, with what that choice misses
    exercises.check_concept("6.3", lambda T, w, L: ...)  # a number question: its answer, or a function of its sizes
    exercises.concept_answer("7.1")       # the answer and why: self-study only

An answer is checked against the question's sealed record (checking.sealed: salted hashes and sealed
messages, naming no letter or number); any number it has no words for reads "... is not it".
A number question's record also states the sizes it is asked at; a function answer is called there
(positionally, in that order). Inside a hidden variant (checking.variants.shifted_seeds) it is also called at
VARIANT_SIZES other sizes drawn from the variant's offset, each checked against the question built and
sealed there, which needs exercises/answers/ (the judge has it); a whole number answers only the
stated sizes, and fails there.

Where the records come from: a class release ships the records of its notebook's questions
(OUT/student/NN_name/tests/concepts.json, written by `python -m gptlib_course assign`, a fresh salt
per build; `grader = Notebook("tests")` loads them); a self-study install seals the questions of
exercises/answers/concepts.py on first use. There is one way of checking: the self-study check
reads the same records. (Trying every letter in the kernel finds a choice's answer, as guessing
would; the record only keeps the answer from being read off the package or the notebook.)
"""

from __future__ import annotations

import functools
import random
import secrets

from ..checking import sealed
from ..checking.mistakes import note_ids
from ..checking.reading import as_int
from ..checking.result import FAILED, NOT_ATTEMPTED, PASSED, Result
from ..checking.running import Wrong, call, checker
from ..checking.variants import variant_points

VARIANT_SIZES = 2  # other sizes a hidden variant asks a number question at, after the stated ones
_RELEASED: dict[str, dict] = {}  # id -> the sealed record a class release loaded


def load_released(records: dict[str, dict]) -> None:
    """Use these sealed records (a class release's tests/concepts.json) for their questions."""
    _RELEASED.update(records)


def _answers(missing: str):
    """exercises/answers/concepts.py, or ValueError(missing) where it is absent (a class release)."""
    try:
        from .answers import concepts
    except ModuleNotFoundError:
        raise ValueError(missing) from None
    return concepts


@functools.cache
def _self_study_record(question: str) -> tuple[dict, dict[str, bytes]]:
    """The question sealed here under a fresh salt, with the keys sealing derived: a check of an answer it
    has words for then opens the record with that key instead of deriving it again (a judge checks the
    same few answers of a whole class; ITERATIONS slow a table of guesses, not the grader)."""
    specs = _answers(f"question {question!r} has no sealed record here: in a class release, run the notebook's "
                     "first cells (grader = Notebook(\"tests\")) before answering").SEALED
    if question not in specs:
        raise ValueError(f"no concept question {question!r}: they are {', '.join(specs)}")
    return sealed.sealed_with_keys(question, specs[question], secrets.token_bytes(16))


def _record(question: str) -> tuple[dict, dict[str, bytes]]:
    """The question's record, and the keys already derived for it (none for a release's record)."""
    return (_RELEASED[question], {}) if question in _RELEASED else _self_study_record(question)


@functools.cache
def _record_elsewhere(question: str, sizes: tuple[tuple[str, int], ...]) -> tuple[dict, dict[str, bytes]]:
    """Number question `question` built and sealed at other `sizes` (a hidden variant's), with its keys."""
    from .answers.concepts import ASKED_ELSEWHERE

    build, _ = ASKED_ELSEWHERE[question]
    return sealed.sealed_with_keys(question, build(**dict(sizes)), secrets.token_bytes(16))


def _drawn_sizes(question: str, stated: dict[str, int], rng: random.Random) -> tuple[dict[str, int], ...]:
    """The other sizes a hidden variant asks number question `question` at: VARIANT_SIZES of them, each
    different from the stated ones and from one another."""
    _, draw = _answers(f"question {question!r} is asked at other sizes only where it is graded: this install has "
                       "no answers to seal there").ASKED_ELSEWHERE[question]
    drawn: list[dict[str, int]] = []
    while len(drawn) < VARIANT_SIZES:
        sizes = draw(rng)
        if sizes != stated and sizes not in drawn:
            drawn.append(sizes)
    return tuple(drawn)


def _sizes_text(sizes: dict[str, int]) -> str:
    return ", ".join(f"{name} = {value}" for name, value in sizes.items())


def _as_text(record: dict, answer) -> str:
    """The answer as the record spells it: one of its letters, or a whole number's digits."""
    if record["kind"] == "choice":
        letters = record["letters"]
        if not isinstance(answer, str) or answer.strip().lower() not in letters:
            raise Wrong(f"answer with one letter of {letters}, got {answer!r:.40}", mistake="concept-not-a-letter")
        return answer.strip().lower()
    return str(as_int(answer, "your answer"))


def verdict(question: str, letter: str) -> tuple[str, str]:
    """(status, message) of a choice's letter, one of its record's letters: for an exercise's checker that
    asks a choice (check_post_norm_statement). The mistake a wrong letter names is noted for its Result."""
    status, message, mistakes = sealed.opened(question, *_record(question), letter)
    note_ids(*mistakes)
    return status, message


def check_concept(question: str, answer) -> Result:
    """Your answer to concept question `question` ("7.1"): a letter, or a whole number (or a function of the
    sizes the question states that returns it: checked there, and in a hidden variant at other sizes too);
    None = not yet."""
    record, known = _record(question)
    label = f"Question {question}"
    if answer is None:
        kind = "a letter" if record["kind"] == "choice" else (
            f"a whole number, or a function of {', '.join(dict(record['asked_at']))} that returns it")
        return Result(label, NOT_ATTEMPTED, f"replace None with your answer ({kind}).")
    if record["kind"] == "number":
        stated = dict(record["asked_at"])
        points = variant_points((stated,), lambda rng: _drawn_sizes(question, stated, rng))
        if callable(answer):
            return _check_function(question, record, known, answer, points)
        if len(points) > 1:
            return Result(label, FAILED, f"a whole number answers the stated sizes only ({_sizes_text(stated)}); this "
                          f"check also asks at other sizes: answer with a function of {', '.join(stated)} that returns "
                          "the answer.")
    try:
        text = _as_text(record, answer)
    except Wrong as wrong:
        return Result(label, FAILED, wrong.message)
    status, message, mistakes = sealed.opened(question, record, known, text)
    return Result(label, status, message, mistakes=mistakes)


def _check_function(question: str, record: dict, known: dict[str, bytes], answer, points: tuple[dict, ...]) -> Result:
    """A number question answered by a function of its sizes: called (positionally, in the order the question
    states them) at every point, the stated sizes first; the first wrong value fails with what the record says of
    it there."""

    @checker(f"Question {question}")
    def at_every_point():
        said, stated = None, dict(record["asked_at"])
        for sizes in points:
            sizes = {name: sizes[name] for name in stated}  # in the order the question states them
            opened = (record, known) if sizes == stated else _record_elsewhere(question, tuple(sizes.items()))
            where = _sizes_text(sizes)
            value = as_int(call(answer, *sizes.values(), what=where), f"your function's value at {where}")
            status, message, mistakes = sealed.opened(question, *opened, str(value))
            if status != PASSED:
                note_ids(*mistakes)
                raise Wrong(f"your function gives {value:,} at {where}: {message}", mistake=None)
            said = said or message
        others = len(points) - 1
        return said + (f" Your function is also right at {others} other sets of sizes." if others else ""), ()

    return at_every_point()


WITHHELD = "the answers stay with your instructor in this class release"


def concept_answer(question: str) -> str:
    """The answer to concept question `question` and the reason, for when you are stuck (self-study installs)."""
    try:
        from .answers.concepts import QUESTIONS
    except ModuleNotFoundError:
        return f"Question {question}: {WITHHELD}; check_concept tells you whether an answer is right."
    if question not in QUESTIONS:
        raise ValueError(f"no concept question {question!r}: they are {', '.join(QUESTIONS)}")
    spec = QUESTIONS[question]
    if hasattr(spec, "letters"):
        return f"Question {question}: ({spec.answer}). {spec.why}"
    answer = spec.answer()
    return f"Question {question}: {answer:,}. {spec.why(answer)}"
