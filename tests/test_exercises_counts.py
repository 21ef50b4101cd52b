"""Exercises 1 and 5: the count checkers accept a right count and name each typical mistake."""

import pytest

from gptlib import COURSE_CONFIG
from gptlib.exercises import check_parameter_count, check_parameter_table, check_tied_count, solutions
from gptlib.exercises.result import ERROR, FAILED

pytestmark = pytest.mark.usefixtures("one_thread")


def learner_count(c, *, qkv_bias=False, W_U_bias=False, positions=True, final_ln=True, b_O=True, tie_aware=True,
                  ln_shifts=True, drop_E_when_tied=False):
    """A count written the way a learner would, with switches for the typical slips."""
    d, L = c.d, c.L
    ln = (2 if ln_shifts else 1) * d
    attention = 3 * d * d + (3 * d if qkv_bias else 0) + d * d + (d if b_O else 0)
    mlp = 8 * d * d + 4 * d + d
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
        ({"qkv_bias": True}, "includes biases on W_Q, W_K, W_V"),
        ({"W_U_bias": True}, "bias on W_U"),
        ({"positions": False}, "left out the positional embeddings P"),
        ({"final_ln": False}, "left out the final LayerNorm"),
        ({"b_O": False}, "b_O"),
        ({"tie_aware": False}, "E counted twice"),
        ({"drop_E_when_tied": True}, "E is still there"),
        ({"ln_shifts": False}, "d gains AND d shifts"),
    ],
)
def test_each_typical_slip_is_rejected_by_name(slip, message):
    r = check_parameter_count(lambda c: learner_count(c, **slip))
    assert r.status == FAILED and message in r.message
    assert "numel()" in r.details[0]


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
    assert r.status == FAILED and "E is still there" in r.message
    r = check_tied_count(lambda c: learner_count(c, qkv_bias=True))
    assert r.status == FAILED and "W_Q, W_K, W_V" in r.message
    assert check_tied_count(learner_count(COURSE_CONFIG.replace(tie_weights=True))).passed
