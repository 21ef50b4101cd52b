"""gptlib.exercises' plumbing: Result, the never-raise decorator, hints and solutions."""

import itertools
import subprocess
import sys

import numpy as np
import pytest
import torch

import gptlib
from gptlib import GPT, GPTConfig, exercises
from gptlib.checking import (
    ERROR,
    FAILED,
    NOT_ATTEMPTED,
    PASSED,
    Wrong,
    as_float,
    as_int,
    as_numbers,
    call,
    checker,
    mistakes,
    result,
    running,
)
from gptlib.exercises import attention, cost, hints, layernorm
from gptlib.exercises.answers import solutions


@checker("Exercise 0")
def _check_double(fn):
    if call(fn, 2) != 4:
        raise Wrong("not doubled", ["fn(2) != 4"], mistake="not-doubled")
    return "doubled.", ["fn(2) == 4"]


def test_each_outcome_becomes_a_result_with_its_status_and_text():
    ok = _check_double(lambda x: 2 * x)
    assert ok.passed and ok.status == PASSED and "doubled" in repr(ok) and "fn(2) == 4" in repr(ok)
    bad = _check_double(lambda x: x)
    assert not bad.passed and bad.status == FAILED and bad.message == "not doubled" and bad.details == ("fn(2) != 4",)


def test_the_truth_value_of_a_result_is_its_verdict():
    assert _check_double(lambda x: 2 * x)
    assert not _check_double(lambda x: x)
    assert not _check_double(lambda x: 1 / 0)


def test_a_stub_is_not_attempted_and_other_exceptions_are_reported_with_type_and_message():
    def stub(x):
        raise NotImplementedError

    def broken(x):
        return x / 0

    assert _check_double(stub).status == NOT_ATTEMPTED
    assert "not attempted yet" in repr(_check_double(stub))
    reported = _check_double(broken)
    assert reported.status == ERROR and "ZeroDivisionError" in reported.message and "division by zero" in reported.message


def test_a_NotImplementedError_raised_inside_a_library_is_an_error_not_a_stub():
    def forgot_forward(x):  # torch's Module.forward raises NotImplementedError when a model defines none
        return torch.nn.Module()(x)

    def calls_a_stub_of_its_own(x):
        def helper(y):
            raise NotImplementedError("your code here")

        return helper(x)

    r = _check_double(forgot_forward)
    assert r.status == ERROR and r.message.startswith("forgot_forward(...) raised NotImplementedError")
    assert _check_double(calls_a_stub_of_its_own).status == NOT_ATTEMPTED


def _vandal(x, config):
    """A learner function that changes everything it can reach."""
    x.mul_(0)
    object.__setattr__(config, "d", 1)
    torch.set_default_dtype(torch.float64)
    torch.set_grad_enabled(False)
    torch.manual_seed(123)
    return 0


@checker("Exercise 0")
def _check_after_vandal(fn):
    """Calls fn on a tensor and on gptlib.COURSE_CONFIG itself, then reports what the checker sees."""
    x = torch.ones(3)
    call(fn, x, gptlib.COURSE_CONFIG)
    seen = (torch.equal(x, torch.ones(3)), gptlib.COURSE_CONFIG.d, torch.get_default_dtype(), torch.is_grad_enabled())
    return "ran.", [repr(seen)]


@pytest.mark.parametrize("mode", [torch.enable_grad, torch.no_grad, torch.inference_mode])
def test_learner_code_gets_copies_and_the_global_state_it_changes_is_restored(mode):
    before = torch.get_rng_state()
    torch.set_default_dtype(torch.float64)  # a notebook's own settings, which the checker must not depend on
    try:
        with mode():
            grad = torch.is_grad_enabled()
            r = _check_after_vandal(_vandal)
            assert (torch.get_default_dtype(), torch.is_grad_enabled()) == (torch.float64, grad)
    finally:
        torch.set_default_dtype(torch.float32)
    assert r.details == (repr((True, 128, torch.float32, True)),)  # untouched, checked in float32 with grad on
    assert gptlib.COURSE_CONFIG.d == 128 and torch.equal(torch.get_rng_state(), before)


def test_a_function_whose_task_is_to_change_its_argument_gets_the_argument_itself():
    @checker("Exercise 0")
    def check_zeroed(fn):
        x = torch.ones(3)
        call(fn, x, in_place=True)
        if not torch.equal(x, torch.zeros(3)):
            raise Wrong("not zeroed", mistake=None)
        return "zeroed.", []

    def zero_returning_nothing(x):
        x.zero_()

    assert check_zeroed(lambda x: x.zero_()) and check_zeroed(zero_returning_nothing)
    assert not check_zeroed(lambda x: x.clone().zero_())


@pytest.mark.parametrize(
    "value", [(2, 3.5), [2, 3.5], torch.tensor([2, 3.5]), np.array([2, 3.5]), torch.tensor([2.0, 3.5], dtype=torch.float64)]
)
def test_a_pair_of_numbers_is_accepted_in_any_ordinary_container(value):
    first, second = as_numbers(value, ("a", "b"), "a pair")
    assert as_int(first, "a") == 2 and as_float(second, "b") == 3.5


@pytest.mark.parametrize("value", [(1, 2, 3), torch.ones(2, 2), np.ones(3), 5, "ab"])
def test_a_pair_of_the_wrong_length_or_form_is_refused_naming_what_is_expected(value):
    with pytest.raises(Wrong, match=r"2 numbers \(a, b\)"):
        as_numbers(value, ("a", "b"), "a pair")


def test_not_attempted_says_which_stub_or_what_placeholder():
    def stub(x):
        raise NotImplementedError

    r = _check_double(stub)
    assert r.message == "stub(...) still raises NotImplementedError: replace the stub's body with your own code."

    @checker("Exercise 0")
    def check_choice(choice):
        if choice is None:
            running.not_attempted("no choice made yet")
        return "chosen.", []

    r = check_choice(None)
    assert r.status == NOT_ATTEMPTED and r.message == "no choice made yet"


def test_a_non_callable_answer_is_rejected_not_raised():
    r = _check_double(4)
    assert r.status == FAILED and "expected a function" in r.message


def test_html_repr_escapes_and_colours_by_status():
    html = _check_double(lambda x: x)._repr_html_()
    assert "<pre" in html and result._COLOURS[FAILED] in html and "not doubled" in html


@pytest.mark.parametrize("value, expected", [(3, 3), (3.0, 3), (np.int64(3), 3), (np.array(3.0), 3), (torch.tensor([3]), 3)])
def test_as_int_accepts_whole_numbers(value, expected):
    assert as_int(value, "x") == expected


@pytest.mark.parametrize("value", [3.5, "3", True, None, float("nan")])
def test_as_int_refuses_anything_else_with_wrong(value):
    with pytest.raises(Wrong, match="whole number"):
        as_int(value, "x")


@pytest.mark.parametrize(
    "points, mistakes",
    [
        (attention.FACTOR_SHAPES, attention.FACTOR_MISTAKES),
        (attention.RANK_SHAPES, attention.RANK_MISTAKES),
        ([(c,) for c in layernorm.SCALES], layernorm.DECAY_MISTAKES),
        (cost.FLOP_POINTS, cost.FLOP_MISTAKES),
        ([(c,) for c in cost.TAKEOVER_CONFIGS], cost.TAKEOVER_MISTAKES),
    ],
)
def test_the_points_a_checker_tries_tell_its_typical_mistakes_apart(points, mistakes):
    """Mistakes that predict the same answers at every point tried can only be named together, as
    candidates: the one such pair is a causal mask's half against one of the two attention products."""
    predictions = {name: [mistake(*point) for point in points] for name, mistake in mistakes.items()}
    twins = [(a, b) for a, b in itertools.combinations(predictions, 2) if predictions[a] == predictions[b]]
    assert all("causal mask" in a + b and "one" in a + b for a, b in twins), twins


def test_name_mistake_names_one_lists_candidates_or_a_pair_or_nothing():
    typical = {"doubled": lambda x: 2 * x, "squared": lambda x: x * x, "added to itself": lambda x: x + x}
    assert mistakes.name_mistake({2: 4, 3: 9}, typical) == "squared"
    both = mistakes.name_mistake({2: 4, 3: 6}, typical)
    assert both.startswith("your answer is what each of 2 typical mistakes gives") and "doubled; or added to itself" in both
    assert mistakes.name_mistake({2: 4, 3: 7}, typical) is None  # each explains one point, none both
    assert mistakes.name_mistake({2: 8, 3: 15}, {"doubled": lambda x: 2 * x, "squared": lambda x: x * x}, pairs=True) == (
        "exactly what two mistakes together give: doubled and squared"
    )
    near = {"doubled": lambda x: 2 * x, "tripled": lambda x: 3 * x}
    assert mistakes.name_mistake({3: 6.3}, near, lambda got, predicted: abs(got - predicted) < 0.5) == "doubled"
    several = {"sum": lambda a, b: a + b, "product": lambda a, b: a * b}  # a tuple point is several arguments
    assert mistakes.name_mistake({(2, 3): 5, (1, 1): 2}, several) == "sum"
    same = {name: (lambda x: x) for name in "abc"}
    assert mistakes.name_mistake({1: 2, 5: 10}, same, pairs=True).endswith("(a and b); or (a and c); or (b and c)")
    six = {name: (lambda x: x) for name in "abcdef"}
    assert mistakes.name_mistake({1: 1}, six).endswith("a; or b; or c; or d; or 2 more")


def test_explaining_lists_every_combination_of_a_size_that_adds_up_at_every_point():
    typical = {"once": lambda n: n, "twice": lambda n: 2 * n, "three times": lambda n: 3 * n}
    assert mistakes.explaining({1: 3, 2: 6}, typical) == [("three times",)]
    assert mistakes.explaining({1: 3, 2: 6}, typical, size=2) == [("once", "twice")]
    assert mistakes.explaining({1: 4, 2: 8}, typical, size=2) == [("once", "three times")]
    assert mistakes.explaining({1: 3, 2: 7}, typical) == []  # "three times" explains only the first point
    assert mistakes.explaining({(): 0}, typical, size=0) == [()] and mistakes.explaining({(): 1}, typical, size=0) == []
    assert mistakes.explaining({2: (2, 4)}, {"pair": lambda n: (n, 2 * n)}) == [("pair",)]  # one prediction as it is


@pytest.mark.parametrize(
    "got, expected, tolerances, equal",
    [
        (3, 3, {}, True),
        (3.0000001, 3, {}, False),
        (3.0000001, 3, {"rtol": 1e-6}, True),
        (torch.ones(2, dtype=torch.float32), torch.ones(2, dtype=torch.float64), {}, True),
        (torch.ones(2), torch.ones(1, 2), {"atol": 1}, False),  # shapes must agree, no broadcasting
        ((1.0, torch.zeros(2)), [1.0, torch.full((2,), 1e-7)], {"atol": 1e-6}, True),
        ((1.0,), (1.0, 2.0), {}, False),
        (float("nan"), 0.0, {"atol": 1}, False),
        (torch.tensor([100.0, 1.5]), torch.tensor([100.0, 1.0]), {"rtol": 0.01}, False),  # 0.5 > 1% of 1
        (torch.tensor([100.0, 1.5]), torch.tensor([100.0, 1.0]), {"rtol": 0.01, "of_largest": True}, True),  # <= 1% of 100
        (torch.tensor([100.0, 2.5]), torch.tensor([100.0, 1.0]), {"rtol": 0.01, "of_largest": True}, False),
    ],
)
def test_close_is_one_rule_for_numbers_tensors_and_tuples(got, expected, tolerances, equal):
    assert mistakes.close(got, expected, **tolerances) is equal


def test_hints_are_progressive_and_point_to_the_next_level(capsys):
    for n in range(1, 9):
        levels = len(hints.HINTS[n])
        assert levels >= 2
        exercises.hint(n)
        assert f"hint 1 of {levels}" in capsys.readouterr().out
        exercises.hint(n, levels)
        assert f"show_solution({n})" in capsys.readouterr().out
    with pytest.raises(ValueError, match="1 to 8"):
        exercises.hint(9)
    with pytest.raises(ValueError, match="hint levels"):
        exercises.hint(1, 0)


def test_show_solution_prints_the_reference_source(capsys):
    for n in range(1, 9):
        exercises.show_solution(n)
        out = capsys.readouterr().out
        for fn in solutions.SOLUTIONS[n]:
            assert f"def {fn.__name__}(" in out


@pytest.mark.slow  # a fresh interpreter or a training run
def test_importing_the_exercises_loads_neither_matplotlib_nor_ipywidgets():
    code = "import sys, gptlib.exercises; print(sorted(m for m in ('matplotlib', 'ipywidgets') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120).stdout
    assert out.strip() == "[]"


def _all_checks(answers, model):
    """Every checker of the package, each called with answers[name] (a stub or the reference solution),
    the two that check a whole model with `model`."""
    return [
        exercises.check_parameter_count(answers["count"]),
        exercises.check_parameter_table(answers["rows"]),
        exercises.check_tied_count(answers["tied_count"]),
        exercises.check_causality(model),
        exercises.check_dependency_map(answers["dependency_map"]),
        exercises.check_own_model(model, V=11, T_max=8, d=16, L=1),
        exercises.check_factor_pair_dimension(answers["factor_pair_dimension"]),
        exercises.check_layer_norm(answers["project"], answers["rescale"]),
        exercises.check_weight_decay(answers["weight_decay_prediction"]),
        exercises.check_head_circuits(answers["head_circuits"]),
        exercises.check_rank_bounds(answers["rank_bounds"]),
        exercises.check_post_norm_jacobian(answers["post_norm_jacobian"]),
        exercises.check_post_norm_statement(answers["post_norm_statement"]),
        exercises.check_training_flops(answers["flops_per_token"]),
        exercises.check_attention_takeover(answers["takeover_T"]),
    ]


def test_stubs_read_not_attempted_references_pass_and_no_checker_moves_the_callers_random_generator(one_thread):
    """The references are checked under torch.no_grad(): each checker turns on the grad mode it needs."""
    def stub(*args):  # the notebooks' scaffold, for a function and for a model alike
        raise NotImplementedError("your code here")

    reference = {name: getattr(solutions, name) for name in dir(solutions)}
    stubs = dict.fromkeys(reference, stub) | {"post_norm_statement": None}
    gpt = GPT(GPTConfig(V=11, T_max=8, d=16, H=2, L=1))
    for answers, model, status, grad in ((stubs, stub, NOT_ATTEMPTED, True), (reference, gpt, PASSED, False)):
        state = torch.get_rng_state()
        with torch.set_grad_enabled(grad):
            results = _all_checks(answers, model)
        assert torch.equal(torch.get_rng_state(), state)
        assert [r for r in results if r.status != status] == []
