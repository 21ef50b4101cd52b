"""gptlib.validation: each input kind accepted in its shape, refused with the rule's message otherwise,
including the values a careless or hostile caller passes."""

import inspect
import math
import re
from fractions import Fraction

import numpy as np
import pytest
import torch

from gptlib import COURSE_CONFIG, GPT, validation


@pytest.mark.parametrize("value, expected", [(3, 3), (np.int64(3), 3), (torch.tensor(3), 3), (2**70, 2**70)])
def test_integer_accepts_integers_of_any_kind(value, expected):
    result = validation.integer("n", value, at_least=0)
    assert result == expected and type(result) is int


@pytest.mark.parametrize("value", [True, 3.0, 2.5, "3", None, float("nan"), torch.tensor(3.0), [3]])
def test_integer_refuses_everything_else(value):
    with pytest.raises(ValueError, match=r"^n must be an integer >= 0, got "):
        validation.integer("n", value, at_least=0)


def test_integer_bounds_are_stated():
    with pytest.raises(ValueError, match=re.escape("n must be an integer in [1, 5], got 6")):
        validation.integer("n", 6, at_least=1, at_most=5)
    with pytest.raises(ValueError, match=re.escape("n must be an integer <= 5, got 6")):
        validation.integer("n", 6, at_most=5)


@pytest.mark.parametrize("value, expected", [(0.5, 0.5), (1, 1.0), (np.float32(0.5), 0.5), (Fraction(1, 4), 0.25),
                                             (-0.0, 0.0), (1e308, 1e308)])
def test_real_accepts_finite_numbers(value, expected):
    result = validation.real("x", value, at_least=0)
    assert result == expected and type(result) is float and str(result) != "-0.0"


# The real-number checks mirror the integer ones above: same rules, stated for another kind of input.
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), "0.5", None, True, 1j, torch.tensor(0.5)])
def test_real_refuses_non_finite_and_non_numbers(value):
    with pytest.raises(ValueError, match=r"^x must be a finite number > 0, got "):
        validation.real("x", value, above=0)


def test_real_bounds_are_stated():
    with pytest.raises(ValueError, match=re.escape("x must be a finite number > 0 and <= 1.0, got 2.0")):
        validation.real("x", 2.0, above=0, at_most=1.0)
    with pytest.raises(ValueError, match=re.escape("x must be a finite number in [0, 1], got -1.0")):
        validation.real("x", -1, at_least=0, at_most=1)
    with pytest.raises(ValueError, match=re.escape("x must be a finite number > 0, got 0.0")):
        validation.real("x", -0.0, above=0)


@pytest.mark.parametrize("value", ["False", "True", 0, 1, None, np.bool_(True)])
def test_boolean_takes_only_true_and_false(value):
    with pytest.raises(ValueError, match=r"^flag must be True or False, got "):
        validation.boolean("flag", value)
    assert validation.boolean("flag", False) is False


def test_token_ids_come_back_as_int64_of_the_same_values():
    ids = torch.tensor([[0, 64, 7]], dtype=torch.uint8)
    out = validation.token_ids(ids, 65)
    assert out.dtype == torch.int64 and out.tolist() == [[0, 64, 7]]
    assert validation.token_ids(torch.zeros(0, dtype=torch.int16), 65, allow_empty=True).dtype == torch.int64


@pytest.mark.parametrize(
    "ids, kwargs, rule",
    [
        (torch.tensor([1, 2]).to_sparse(), {}, "must be a dense tensor holding values, got layout torch.sparse_coo"),
        (torch.zeros(2, dtype=torch.long, device="meta"), {}, "holding values, got layout torch.strided on meta"),
        (torch.zeros(2, 3, dtype=torch.long), dict(dims=(1,)), "must be 1-D (T,), got shape (2, 3)"),
        (torch.zeros(1, 9, dtype=torch.long), dict(T_max=8), "1 <= T <= T_max=8, got T=9"),
        (torch.zeros(5, dtype=torch.int8) - 1, {}, "must lie in [0, V) = [0, 65), got -1, -1, -1, -1, -1$"),
        (torch.full((9,), 100, dtype=torch.int16), {}, "got 100, 100, 100, 100, 100 and 4 more"),
        (torch.zeros(2, dtype=torch.complex64), {}, "integer dtype, got torch.complex64"),
    ],
)
def test_token_ids_name_the_rule(ids, kwargs, rule):
    with pytest.raises(ValueError, match=re.escape(rule) if rule[-1] != "$" else re.escape(rule[:-1]) + "$"):
        validation.token_ids(ids, 65, **kwargs)


def test_shape_wants_a_tensor_of_exactly_that_shape():
    R = torch.zeros(2, 3)
    assert validation.tensor_of_shape(R, (2, 3), "R", "(m, n)") is R
    with pytest.raises(ValueError, match=re.escape("R must be a matrix of shape (m, n) = (2, 3), got (3, 2)")):
        validation.tensor_of_shape(torch.zeros(3, 2), (2, 3), "R", "(m, n)", "a matrix")
    with pytest.raises(ValueError, match=re.escape("R must be a tensor of shape (m, n) = (2, 3), got (2, 3, 1)")):
        validation.tensor_of_shape(torch.zeros(2, 3, 1), (2, 3), "R", "(m, n)")
    with pytest.raises(ValueError, match=re.escape("R must be a tensor of shape (m, n) = (2, 3), got list")):
        validation.tensor_of_shape([[0.0] * 3] * 2, (2, 3), "R", "(m, n)")


def test_rows_accepts_any_leading_shape_and_refuses_integers_and_scalars():
    for u in (torch.randn(3), torch.randn(2, 4, 3)):
        assert validation.rows(u) is u
    with pytest.raises(ValueError, match="floating-point"):
        validation.rows(torch.ones(3, dtype=torch.long))
    with pytest.raises(ValueError, match="last \\(feature\\) dimension"):
        validation.rows(torch.tensor(1.0), name="v")


def test_batch_wants_three_dimensions_and_the_given_width():
    X = torch.randn(2, 5, 8)
    assert validation.batch(X) is X and validation.batch(X, d=8) is X
    with pytest.raises(ValueError, match=r"\(B, T, d\) tensor, got \(5, 8\)"):
        validation.batch(torch.randn(5, 8))
    with pytest.raises(ValueError, match="with d=4, got"):
        validation.batch(torch.randn(2, 5, 8), d=4)
    with pytest.raises(ValueError, match="got list"):
        validation.batch([1.0])


def test_sequence_wants_one_sequence_of_the_given_width():
    X = torch.randn(5, 8)
    assert validation.sequence(X, d=8) is X
    for bad in (torch.randn(1, 5, 8), torch.randn(5, 4)):
        with pytest.raises(ValueError, match="one sequence of shape"):
            validation.sequence(bad, d=8)


def test_token_sequence_wants_one_valid_sequence():
    model = GPT(COURSE_CONFIG.replace(L=1))
    ids = validation.token_sequence(model, torch.tensor([1, 2, 3], dtype=torch.uint8))
    assert ids.dtype == torch.int64 and ids.tolist() == [1, 2, 3]
    with pytest.raises(ValueError, match=r"idx \(one sequence of token ids\) must be 1-D \(T,\), got shape \(1, 3\)"):
        validation.token_sequence(model, torch.tensor([[1, 2, 3]]))
    with pytest.raises(ValueError, match=r"\[0, V\)"):
        validation.token_sequence(model, torch.tensor([1, 65]))


def test_every_check_is_named_after_its_input_and_returns_it():
    """The one naming scheme of gptlib.validation: a public function per kind of input, no check_ prefix,
    each returning the checked value (so a call reads `value = validation.kind(...)`)."""
    public = {name for name, f in vars(validation).items() if inspect.isfunction(f) and f.__module__ == validation.__name__
              and not name.startswith("_")}
    assert public == {"integer", "real", "boolean", "seed", "token_ids", "token_sequence", "positions",
                      "tensor_of_shape", "rows", "batch", "sequence", "finite_weights"}
    assert all(inspect.signature(getattr(validation, name)).return_annotation not in (None, "None") for name in public)


@pytest.mark.parametrize("value", [True, 1.5, -1, 2**64, "3"])
def test_a_seed_is_an_integer_in_torchs_range(value):
    with pytest.raises(ValueError, match=r"^seed must be an integer in \[0, 18446744073709551615\], got"):
        validation.seed("seed", value)
    assert validation.seed("seed", 2**64 - 1) == 2**64 - 1 and torch.Generator().manual_seed(2**64 - 1) is not None


def test_positions_are_bounded_by_the_sequence_length_and_say_so():
    assert validation.positions(torch.tensor([0, 5], dtype=torch.uint8), 6).tolist() == [0, 5]
    with pytest.raises(ValueError, match=r"^positions must lie in \[0, T\) = \[0, 6\), got 6$"):
        validation.positions(torch.tensor([0, 6]), 6)


def test_finite_weights_names_the_first_weight_holding_nan_or_inf():
    model = GPT(COURSE_CONFIG.replace(L=1))
    assert validation.finite_weights(model) is model
    with torch.no_grad():
        model.blocks[0].mlp.b_1[:3] = torch.tensor([math.nan, math.inf, 1.0])
    with pytest.raises(ValueError, match=r"^model's weights must be finite, got 2 NaN or inf values in blocks.0.mlp.b_1$"):
        validation.finite_weights(model)


def test_finite_weights_whose_sum_overflows_are_finite_all_the_same():
    layer = torch.nn.Linear(4, 4)
    with torch.no_grad():
        layer.weight.fill_(3e38)  # finite in float32, but their sum is not
    assert not layer.weight.sum().isfinite() and validation.finite_weights(layer) is layer
    with torch.device("meta"):
        ghost = torch.nn.Linear(4, 4)
    with pytest.raises(ValueError, match="^layer must hold real weights, got weight on the meta device$"):
        validation.finite_weights(ghost, name="layer")
