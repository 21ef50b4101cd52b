"""Every typical mistake a checker names carries a stable identifier (gptlib/checking/mistakes.py),
declared once across all checkers, and a failed check records the identifiers of what it named."""

import ast
import pickle
from pathlib import Path

import pytest
import torch

from gptlib import exercises
from gptlib.checking.mistakes import ID, Mistake, named_mistakes, note

EXERCISES = Path(exercises.__file__).parent


def _declared() -> list[tuple[str, str]]:
    """(identifier, file) of every Mistake("...", ...) written in the checkers' sources."""
    found = []
    for path in sorted(EXERCISES.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Mistake":
                first = node.args[0]
                assert isinstance(first, ast.Constant), f"{path}:{node.lineno}: a mistake's id must be a literal"
                found.append((first.value, str(path.relative_to(EXERCISES))))
    return found


def test_every_identifier_is_declared_once_across_all_checkers():
    declared = _declared()
    ids = [i for i, _ in declared]
    assert len(ids) > 100  # the tables of heads, flops, jacobian, layernorm, patching, counts and the build track
    assert [i for i in ids if ids.count(i) > 1] == []
    assert all(ID.match(i) for i in ids)


def test_a_mistake_reads_as_its_message_and_keeps_its_id_through_pickle():
    m = Mistake("mask-off-by-one", "the mask is off by one")
    assert m == "the mask is off by one" and f"{m}." == "the mask is off by one."
    again = pickle.loads(pickle.dumps(m))
    assert (again, again.id) == (m, "mask-off-by-one")
    with pytest.raises(ValueError, match="id"):
        Mistake("Mask Off", "the mask is off by one")


def test_note_records_only_inside_a_check_and_each_id_once():
    note(Mistake("a-mistake", "x"))  # outside: nowhere to record, no error
    with named_mistakes() as named:
        note(Mistake("a-mistake", "x"), "no id", Mistake("b-mistake", "y"), Mistake("a-mistake", "x"))
    assert named == ["a-mistake", "b-mistake"]


def test_a_failed_check_carries_the_identifier_beside_the_unchanged_message():
    def project(u):  # the whole tensor's mean: a typical mistake of Exercise 3
        return u - u.mean()

    def rescale(v, eps):
        return v / torch.sqrt(v.pow(2).mean(-1, keepdim=True) + eps)

    result = exercises.check_layer_norm(project, rescale)
    assert not result and result.mistakes == ("project-whole-tensor-mean",)
    declared = dict(_declared())
    assert all(m in declared for m in result.mistakes)
    from gptlib.exercises.layernorm import PROJECT_MISTAKES
    message = next(k for k in PROJECT_MISTAKES if k.id == "project-whole-tensor-mean")
    assert str(message) in result.message
    assert exercises.check_layer_norm(lambda u: u - u.mean(-1, keepdim=True), rescale).mistakes == ()
