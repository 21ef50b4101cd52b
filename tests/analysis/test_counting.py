"""Theorem 5.2: the closed form, the measured table, and numel over many configs."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gptlib import COURSE_CONFIG, GPT, GPTConfig, component_table, format_table, measured_table, theorem_5_2
from gptlib.analysis.counting import Row


def numel(model):
    return sum(p.numel() for p in model.parameters())


def test_course_table_is_the_lectures(course_model):
    # The lecture's table (Section 5), row by row.
    expected = {
        "token and positional embeddings": 16_512,
        "attention in all blocks": 262_656,
        "MLPs in all blocks": 526_848,
        "block LayerNorms": 2_048,
        "final LayerNorm and unembedding": 8_576,
        "total": 816_640,
    }
    rows = component_table(course_model)
    assert {r.component: r.parameters for r in rows} == expected
    assert abs(sum(r.share for r in rows[:-1]) - 1) < 1e-12
    assert "816,640" in format_table(rows)


def test_closed_form_formula_for_course():
    V, T, d, L = 65, 64, 128, 4
    assert theorem_5_2(COURSE_CONFIG) == 2 * V * d + T * d + L * (12 * d * d + 10 * d) + 2 * d == 816_640


def test_tied_count_is_dV_smaller():
    tied = COURSE_CONFIG.replace(tie_weights=True)
    assert theorem_5_2(tied) == 816_640 - 65 * 128 == numel(GPT(tied))
    assert component_table(GPT(tied))[4].parameters == 2 * 128


def test_measured_table_is_the_table_of_a_real_model(course_model):
    # measured_table builds on the meta device; the references are models with real weights.
    tied = COURSE_CONFIG.replace(tie_weights=True, L=2)
    for config, model in ((COURSE_CONFIG, course_model), (tied, GPT(tied))):
        table = measured_table(config)
        assert table == tuple(row.parameters for row in component_table(model))
        assert table[-1] == numel(model)


configs = st.builds(
    lambda V, T_max, d_head, H, L, tie, mult, attn_only: GPTConfig(
        V=V,
        T_max=T_max,
        d=d_head * H,
        H=H,
        L=L,
        tie_weights=tie,
        d_ff=None if mult == 4 else mult * d_head * H,
        attn_only=attn_only,
    ),
    V=st.integers(1, 300),
    T_max=st.integers(1, 128),
    d_head=st.integers(1, 16),
    H=st.integers(1, 8),
    L=st.integers(1, 6),
    tie=st.booleans(),
    mult=st.sampled_from([1, 2, 4]),
    attn_only=st.booleans(),
)


@settings(max_examples=300, deadline=None)
@given(configs)
def test_closed_form_equals_numel(config):
    with torch.device("meta"):  # shapes only: no memory, no init cost
        model = GPT(config)
    assert theorem_5_2(config) == numel(model) == component_table(model)[-1].parameters


def test_the_table_refuses_what_has_nothing_to_count():
    with pytest.raises(ValueError, match=r"model \(Module\) has no parameters to count"):
        component_table(torch.nn.Module())
    with pytest.raises(ValueError, match="model must be a torch.nn.Module, got GPTConfig"):
        component_table(COURSE_CONFIG)


def test_format_table_columns_fit_their_headers_and_no_rows_print_the_header():
    assert format_table([]) == "component  parameters   share"
    lines = format_table([Row("E", 3, 0.25), Row("total", 12, 1.0)]).splitlines()
    assert lines == ["component  parameters   share",
                     "E                   3   25.0%",
                     "total              12  100.0%"]
