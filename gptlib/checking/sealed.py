"""Sealed answers: a question's verdicts held without its answer, by salted hashes and sealed messages.

A question's sealed record lists, for every answer the checker has something to say about (each
letter of a choice; the right number and each typical wrong number of a number question), a
salted slow hash of "id:answer" and the verdict and message for that answer, encrypted with a key
derived from the answer itself. Opening an answer derives its key, looks the hash up and opens
that message: the right answer's explanation is readable only by someone who gives it, and the
record names no letter or number. Any other number reads "... is not it".

    seal(question, spec, salt)                  the record, JSON-ready (a class release ships it)
    sealed_with_keys(question, spec, salt)      the record and the key it derived for each answer it has words for
    opened(question, record, known, text)       (status, message, mistakes' identifiers) for an answer spelled `text`

A spec is a concept question as gptlib/exercises/answers/concepts.py writes it (a Choice: `letters()`,
`answer`, `why`, `wrong`; or a Number: `answer()`, `why(answer)`, `mistakes`, `asked_at`); the concept
questions' checker (exercises/concepts.py, `exercises.check_concept`) checks answers against these records.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets

from .mistakes import name_mistake, named_mistakes
from .result import FAILED, PASSED

ITERATIONS = 10_000  # PBKDF2 rounds per answer tried: milliseconds for a learner, slow for a table of all numbers


def _key(salt: bytes, question: str, answer: str) -> bytes:
    return hashlib.pbkdf2_hmac("sha256", f"{question}:{answer}".encode(), salt, ITERATIONS)


def _xor(key: bytes, data: bytes) -> bytes:
    stream = b"".join(hashlib.sha256(key + i.to_bytes(4, "big")).digest() for i in range(len(data) // 32 + 1))
    return bytes(a ^ b for a, b in zip(data, stream))


def _lock(key: bytes, status: str, message: str, mistakes: tuple[str, ...]) -> str:
    return base64.b64encode(_xor(key, json.dumps([status, message, list(mistakes)]).encode())).decode()


def _unlock(key: bytes, token: str) -> tuple[str, str, tuple[str, ...]]:
    status, message, mistakes = json.loads(_xor(key, base64.b64decode(token)))
    return status, message, tuple(mistakes)


def _lookup(key: bytes) -> str:
    return hashlib.sha256(key).hexdigest()


def _outcomes(spec) -> dict[str, tuple[str, str, tuple[str, ...]]]:
    """{answer as text: (status, message, identifiers of the mistakes it names)} for every answer the question
    has words for (a Choice or Number of answers/concepts.py, whose mistakes are checking.mistakes.Mistake)."""
    if hasattr(spec, "letters"):
        return {letter: (PASSED, f"({letter}): {spec.why}", ()) if letter == spec.answer else
                (FAILED, f"({letter}) is not it: {spec.wrong[letter]}. Try another letter.", (spec.wrong[letter].id,))
                for letter in spec.letters()}
    right = spec.answer()
    found = {str(right): (PASSED, f"{right:,}: {spec.why(right)}", ())}
    for mistake in spec.mistakes.values():
        number = mistake()
        if str(number) not in found:  # the point (): each mistake is computed with no arguments
            with named_mistakes() as named:
                name = name_mistake({(): number}, spec.mistakes)
            found[str(number)] = (FAILED, (name or f"{number:,} is not it") + ". Try again.", tuple(named))
    return found


def seal(question: str, spec, salt: bytes | None = None) -> dict:
    """The sealed record of concept question `question` (its Choice or Number): JSON-ready, holding no answer."""
    return sealed_with_keys(question, spec, salt if salt is not None else secrets.token_bytes(16))[0]


def sealed_with_keys(question: str, spec, salt: bytes) -> tuple[dict, dict[str, bytes]]:
    """The sealed record, and the key it derived for each answer it has words for (by the answer as text)."""
    locked, keys = {}, {}
    for answer, (status, message, mistakes) in _outcomes(spec).items():
        keys[answer] = key = _key(salt, question, answer)
        locked[_lookup(key)] = _lock(key, status, message, mistakes)
    record = {"kind": "choice" if hasattr(spec, "letters") else "number", "salt": salt.hex(),
              "outcomes": dict(sorted(locked.items()))}  # in hash order: the order says nothing either
    if record["kind"] == "choice":
        record["letters"] = spec.letters()
    else:  # the sizes the Markdown states, as [name, value] pairs in the order a function answer takes them
        record["asked_at"] = [[name, value] for name, value in spec.asked_at.items()]
    return record, keys


def _answer_key(question: str, record: dict, known: dict[str, bytes], text: str) -> bytes:
    return known[text] if text in known else _key(bytes.fromhex(record["salt"]), question, text)


def opened(question: str, record: dict, known: dict[str, bytes], text: str) -> tuple[str, str, tuple[str, ...]]:
    """(status, message, identifiers of the mistakes it names) the record holds for an answer spelled `text`; a
    number it has no words for fails, naming none."""
    key = _answer_key(question, record, known, text)
    token = record["outcomes"].get(_lookup(key))
    if token is None:  # a number the question has no words for
        return FAILED, f"{int(text):,} is not it. Try again.", ()
    return _unlock(key, token)
