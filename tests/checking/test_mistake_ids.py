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


GPTLIB = EXERCISES.parent
NOTING = {"name_mistake", "note", "note_ids", "verdict"}  # what notes the identifiers of a mistake table or sealed record


def _called(function: ast.AST) -> set[str]:
    return {getattr(c.func, "id", None) or getattr(c.func, "attr", None) for c in ast.walk(function) if isinstance(c, ast.Call)}


def _wrongs() -> list[tuple[str, ast.Call, set[str]]]:
    """(where, the call, what its function calls, one helper of the same module deep) of every Wrong(...) in gptlib:
    found by walking the sources, so a raise added anywhere is held to the rule."""
    found = []
    for path in sorted(GPTLIB.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        functions = {f.name: f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)}
        for function in functions.values():
            for node in ast.walk(function):
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Wrong":
                    called = _called(function)
                    called |= {name for helper in called & functions.keys() for name in _called(functions[helper])}
                    found.append((f"{path.relative_to(GPTLIB)}:{node.lineno}", node, called))
    return found


def test_every_wrong_a_checker_raises_names_its_mistake_by_identifier():
    """A rejection states the identifier of what it names (mistake="...", or a Mistake as its message); None only
    where a mistake table or sealed record names it (name_mistake, note_ids), and a rewording passes its own on."""
    wrongs = _wrongs()
    assert len(wrongs) > 70  # the checkers' rejections and adopt's (every one in gptlib)
    for where, call, called in wrongs:
        given = {k.arg: k.value for k in call.keywords}
        assert "mistake" in given, f"{where}: Wrong(...) without mistake=..."
        value = given["mistake"]
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            assert ID.match(value.value), f"{where}: {value.value!r} is no identifier"
        elif isinstance(value, ast.Constant) and value.value is None:
            assert called & NOTING, f"{where}: mistake=None, but nothing there names a mistake from a table"
        else:
            assert isinstance(value, ast.Attribute) and value.attr in ("id", "mistake"), f"{where}: {ast.unparse(value)}"


def test_identifiers_stated_by_rejections_and_mistakes_are_unique_together():
    stated = [k.value.value for _, call, _ in _wrongs() for k in call.keywords
              if k.arg == "mistake" and isinstance(k.value, ast.Constant) and isinstance(k.value.value, str)]
    ids = stated + [i for i, _ in _declared()]
    assert len(stated) > 50
    assert [i for i in ids if ids.count(i) > 1] == []


def test_a_mistake_continued_keeps_its_identifier():
    m = Mistake("mask-off-by-one", "the mask is off by one")
    longer = m + ": mask only s > t."
    assert (longer, longer.id) == ("the mask is off by one: mask only s > t.", "mask-off-by-one")


def test_a_causality_leak_a_shape_and_an_own_model_verdict_are_counted_by_identifier():
    """The class report once said "no mistake named" for these: each failed Result now carries an identifier."""
    from gptlib import GPT, GPTConfig

    leaky = GPT(GPTConfig(V=65, T_max=8, d=16, H=2, L=1, causal=False))
    assert exercises.check_causality(leaky, T=6).mistakes == ("causality-leak",)
    wrong_shape = exercises.check_layer_norm(lambda u: u[..., :1], lambda v, eps: v)
    assert wrong_shape.mistakes == ("answer-shape",)
    own = exercises.check_own_model(leaky, V=65, T_max=8, d=16, L=1)
    assert not own and "causality-leak" in own.mistakes
    not_a_module = exercises.check_own_model(lambda idx: leaky(idx), V=65, T_max=8, d=16, L=1)
    assert {"causality-leak", "own-model-not-a-module"} <= set(not_a_module.mistakes)
