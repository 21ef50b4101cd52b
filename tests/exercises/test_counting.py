"""Exercises 1 and 5: the count checkers accept a right count and name each typical mistake."""

import math

import numpy as np
import pytest
import torch

from gptlib import COURSE_CONFIG
from gptlib.checking import ERROR, FAILED
from gptlib.exercises import check_parameter_count, check_parameter_table, check_tied_count
from gptlib.exercises.answers import solutions

pytestmark = pytest.mark.usefixtures("one_thread")


def learner_count(c, *, qkv_bias=False, W_U_bias=False, positions=True, final_ln=True, b_O=True, tie_aware=True,
                  ln_shifts=True, drop_E_when_tied=False, d_ff=None, b_1=None):
    """A count written the way a learner would, with switches for the typical slips
    (d_ff, b_1: a fixed width used for the MLP, or for b_1 alone, instead of config.d_ff)."""
    d, L = c.d, c.L
    d_ff = c.d_ff if d_ff is None else d_ff(c)
    b_1 = d_ff if b_1 is None else b_1(c)
    ln = (2 if ln_shifts else 1) * d
    attention = 3 * d * d + (3 * d if qkv_bias else 0) + d * d + (d if b_O else 0)
    mlp = 2 * d * d_ff + b_1 + d
    total = c.V * d + (c.T_max * d if positions else 0) + L * (attention + mlp + 2 * ln) + (ln if final_ln else 0)
    if not (c.tie_weights and tie_aware):
        total += d * c.V + (c.V if W_U_bias else 0)
    if c.tie_weights and drop_E_when_tied:
        total -= d * c.V
    return total


def test_a_count_written_as_a_learner_would_passes():
    assert check_parameter_count(learner_count).passed


@pytest.mark.parametrize(
    "slip, message",
    [
        ({"qkv_bias": True}, "biases on W_Q, W_K, W_V (3d per block)"),
        ({"W_U_bias": True}, "bias on W_U"),
        ({"positions": False}, "no positional embedding P"),
        ({"final_ln": False}, "no final LayerNorm LN_f"),
        ({"b_O": False}, "b_O"),
        ({"tie_aware": False}, "E counted twice"),
        ({"drop_E_when_tied": True}, "no E either"),
        ({"ln_shifts": False}, "LayerNorms with one vector each"),
        ({"d_ff": lambda c: 4 * c.d}, "d_ff = 4d built in"),
        ({"b_1": lambda c: c.d}, "b_1 with d entries"),
        ({"b_1": lambda c: 0}, "no MLP bias b_1"),
    ],
)
def test_each_typical_slip_is_rejected_by_name(slip, message):
    r = check_parameter_count(lambda c: learner_count(c, **slip))
    assert r.status == FAILED and message in r.message
    assert "numel()" in r.details[0]


def test_a_bias_on_the_logits_with_tied_weights_is_named_apart_from_one_on_w_u():
    r = check_parameter_count(lambda c: learner_count(c) + (c.V if c.tie_weights else 0))
    assert r.status == FAILED and "a bias on the logits beside W_U = E^T" in r.message, r


def test_a_count_without_any_linear_bias_is_named_as_one_difference():
    r = check_parameter_count(lambda c: learner_count(c, b_O=False) - c.L * (c.d_ff + c.d))  # no b_O, b_1, b_2
    assert r.status == FAILED and r.message.endswith("no biases in any linear layer (no b_O, b_1, b_2)."), r


def test_nn_linear_default_biases_are_named_as_two_mistakes():
    r = check_parameter_count(lambda c: learner_count(c, qkv_bias=True, W_U_bias=True))
    assert r.status == FAILED and "W_Q, W_K, W_V" in r.message and "bias on W_U" in r.message


def test_a_constant_answer_and_an_unexplained_one_are_rejected():
    r = check_parameter_count(lambda c: 816_640)
    assert r.status == FAILED and "whatever the config" in r.message
    r = check_parameter_count(lambda c: learner_count(c) + c.L * c.L)
    assert r.status == FAILED and "recount row by row" in r.message


def test_raising_code_and_unusable_answers():
    r = check_parameter_count(lambda c: c.undefined_field)
    assert r.status == ERROR and "AttributeError" in r.message
    r = check_parameter_count(lambda c: "816640")
    assert r.status == FAILED and "whole number" in r.message


def test_a_number_is_checked_on_the_course_configuration():
    assert check_parameter_count(learner_count(COURSE_CONFIG)).passed
    r = check_parameter_count(learner_count(COURSE_CONFIG, qkv_bias=True))
    assert r.status == FAILED and "W_Q, W_K, W_V" in r.message


def test_the_table_names_the_row_and_the_mistake():
    def table(c):
        rows = solutions.rows(c)
        rows[1] += 3 * c.L * c.d  # attention with query/key/value biases
        return rows

    r = check_parameter_table(table)
    assert r.status == FAILED and "'attention in all blocks'" in r.message and "W_Q, W_K, W_V" in r.message
    r = check_parameter_table(lambda c: solutions.rows(c)[:4])
    assert r.status == FAILED and "five rows" in r.message
    assert check_parameter_table(solutions.rows(COURSE_CONFIG)).passed


def test_the_tied_count_rejects_the_untied_count_and_removing_E_too():
    r = check_tied_count(lambda c: learner_count(c.replace(tie_weights=False)))
    assert r.status == FAILED and "E counted twice" in r.message
    r = check_tied_count(lambda c: learner_count(c.replace(tie_weights=False)) - 2 * c.d * c.V)
    assert r.status == FAILED and "no E either" in r.message
    r = check_tied_count(lambda c: learner_count(c, qkv_bias=True))
    assert r.status == FAILED and "W_Q, W_K, W_V" in r.message
    assert check_tied_count(learner_count(COURSE_CONFIG.replace(tie_weights=True))).passed


def test_correct_counts_in_other_styles_pass():
    def by_shapes(c):  # every tensor's shape written out, summed with math.prod
        block = [(c.H, c.d, c.d_head)] * 3 + [(c.d, c.d), (c.d,), (c.d_ff, c.d), (c.d_ff,), (c.d, c.d_ff), (c.d,)]
        block += [(c.d,)] * 4
        shapes = [(c.V, c.d), (c.T_max, c.d)] + block * c.L + [(c.d,), (c.d,)] + ([] if c.tie_weights else [(c.d, c.V)])
        return sum(math.prod(shape) for shape in shapes)

    def with_numpy(c):  # a numpy integer, from a vector of per-block terms
        per_block = np.array([4 * c.d * c.d, c.d, 2 * c.d * c.d_ff, c.d_ff + c.d, 4 * c.d]).sum()
        return np.int64((c.V + c.T_max) * c.d) + c.L * per_block + 2 * c.d + (0 if c.tie_weights else c.d * c.V)

    def as_tensor(c):  # a one-element float tensor
        return torch.tensor(float(learner_count(c)))

    for count in (by_shapes, with_numpy, as_tensor):
        assert check_parameter_count(count).passed, count.__name__
        assert check_tied_count(count).passed, count.__name__


def test_theorem_5_2_with_d_ff_4d_built_in_fails_both_exercises_by_name():
    def closed_form(c):  # 2Vd + T_max d + L(12 d^2 + 10 d) + 2d, untied; tied removes dV
        return (1 if c.tie_weights else 2) * c.V * c.d + c.T_max * c.d + c.L * (12 * c.d**2 + 10 * c.d) + 2 * c.d

    assert check_parameter_count(closed_form(COURSE_CONFIG)).passed  # right on the course configuration...
    for check in (check_parameter_count, check_tied_count):
        r = check(closed_form)  # ...but not for a config whose d_ff is not 4d
        assert r.status == FAILED and "d_ff = 4d built in" in r.message, r


def test_b_1_with_d_entries_is_named_not_read_as_two_other_slips():
    r = check_parameter_count(lambda c: learner_count(c, b_1=lambda c: c.d))
    only_b_1 = "your count differs from numel(): b_1 with d entries: it has d_ff, one per hidden unit."
    assert r.status == FAILED and r.message == only_b_1
    assert "b_O" not in r.message and "LayerNorm" not in r.message
    r = check_parameter_count(learner_count(COURSE_CONFIG, b_1=lambda c: c.d))  # one number: candidates only
    assert r.status == FAILED and "b_1 with d entries" in r.message


def test_wrong_counts_in_other_styles_fail_by_name():
    r = check_parameter_count(lambda c: learner_count(c) - 3 * c.L * (c.d * c.d - c.d * c.d_head))
    assert r.status == FAILED and "one head only" in r.message
    r = check_parameter_count(lambda c: learner_count(c) - c.L * c.d * c.d_ff)
    assert r.status == FAILED and "one MLP weight matrix" in r.message
    r = check_tied_count(lambda c: learner_count(c) - c.L * c.d * c.d)
    assert r.status == FAILED and "no W_O (d x d per block)" in r.message


def test_tables_as_numpy_arrays_tensors_and_dicts_are_accepted():
    rows = solutions.rows(COURSE_CONFIG)
    assert check_parameter_table(np.array(rows)).passed
    assert check_parameter_table(torch.tensor(rows)).passed
    assert check_parameter_table(lambda c: np.array(solutions.rows(c), dtype=np.int64)).passed
    assert check_parameter_table(lambda c: torch.tensor(solutions.rows(c), dtype=torch.float64)).passed
    r = check_parameter_table(np.array(rows).reshape(5, 1))
    assert r.status == FAILED and "five rows" in r.message


def test_a_table_with_d_ff_4d_built_in_or_b_1_of_d_fails_in_the_mlp_row():
    def table(c, b_1):
        rows = solutions.rows(c)
        rows[2] = c.L * (2 * c.d * 4 * c.d + 4 * c.d + c.d) if b_1 is None else c.L * (2 * c.d * c.d_ff + b_1(c) + c.d)
        return rows

    r = check_parameter_table(lambda c: table(c, None))
    assert r.status == FAILED and "'MLPs in all blocks'" in r.message and "d_ff = 4d built in" in r.message
    r = check_parameter_table(lambda c: table(c, lambda c: c.d))
    assert r.status == FAILED and "b_1 with d entries" in r.message
