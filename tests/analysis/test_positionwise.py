"""gptlib.analysis.positionwise (Lecture 5, Section 2) against torch's GELU, closed forms and attention as a counter-example."""

import math

import pytest
import torch
import torch.nn.functional as F

from gptlib import COURSE_CONFIG, GPTConfig, encode, run_with_cache
from gptlib.analysis.positionwise import (
    convex_weights_error,
    definition_error,
    gelu_exact,
    gelu_tanh,
    mlp_by_rows,
    permutation_error,
    row_isolation_error,
    separating_direction,
)
from gptlib.model import MLP, MultiHeadAttention
from gptlib.pretrained import load_pretrained


def test_gelu_exact_matches_torch_and_closed_form_values():
    t = torch.linspace(-8, 8, 2001, dtype=torch.float64)
    torch.testing.assert_close(gelu_exact(t), F.gelu(t, approximate="none"), atol=1e-12, rtol=0)
    # Phi(0) = 1/2 and Phi(1) = 0.8413447460685429 (the normal table), written independently of erf
    assert float(gelu_exact(torch.tensor(1.0, dtype=torch.float64))) == pytest.approx(0.8413447460685429, abs=1e-15)
    assert float(gelu_exact(torch.tensor(0.0))) == 0.0


def test_gelu_tanh_matches_torch_but_not_exactly_the_erf_form():
    t = torch.linspace(-8, 8, 2001, dtype=torch.float64)
    torch.testing.assert_close(gelu_tanh(t), F.gelu(t, approximate="tanh"), atol=1e-12, rtol=0)
    gap = (gelu_tanh(t) - gelu_exact(t)).abs().max()
    assert 1e-5 < gap < 1e-3  # a real approximation error, small (about 4.7e-4 on this grid)


@pytest.fixture
def mlp(with_random_weights):
    return with_random_weights(MLP(GPTConfig(d=16)), 0.5)


@torch.no_grad()
def test_mlp_commutes_with_permutations_and_ignores_other_rows(mlp):
    X = torch.randn(2, 9, 16)
    perm = torch.randperm(9)
    assert permutation_error(mlp, X, perm) <= 1e-6
    assert row_isolation_error(mlp, X, 4, torch.Generator().manual_seed(0)) == 0.0


@torch.no_grad()
def test_causal_attention_fails_both_checks(with_random_weights):
    """The same checks catch a map that mixes positions, so they can fail."""
    attn = with_random_weights(MultiHeadAttention(GPTConfig(d=16, H=2)), 0.5)
    X = torch.randn(1, 9, 16)
    perm = torch.arange(9).flip(0)
    assert permutation_error(attn, X, perm) > 1e-2
    assert row_isolation_error(attn, X, 4, torch.Generator().manual_seed(0)) > 1e-2
    assert row_isolation_error(attn, X, 0, torch.Generator().manual_seed(0)) <= 1e-6  # causal: row 0 reads only itself


def test_mlp_parameter_count_is_8d2_plus_5d():
    d = COURSE_CONFIG.d
    assert sum(p.numel() for p in MLP(COURSE_CONFIG).parameters()) == 8 * d * d + 5 * d  # Section 2's count


def test_convex_weights_error_sees_negative_weights_and_bad_sums():
    A = torch.tensor([[1.0, 0.0], [0.25, 0.75]])
    assert convex_weights_error(A) == (0.0, 0.0)
    assert convex_weights_error(torch.tensor([[1.5, -0.5]]))[0] == 0.5
    assert convex_weights_error(torch.tensor([[0.5, 0.25]]))[1] == 0.25


def test_convex_combinations_are_never_separated():
    generator = torch.Generator().manual_seed(0)
    rows = torch.randn(6, 5, generator=generator)
    weights = torch.rand(20, 6, generator=generator)
    weights = weights / weights.sum(1, keepdim=True)
    for point in weights @ rows:
        assert separating_direction(point, rows).margin <= 1e-12


def test_separating_direction_is_the_best_candidate_tried_one_at_a_time():
    # The candidates are scored in one batch; score each alone: u = c / |c|, margin u.p - max_s u.r_s.
    generator = torch.Generator().manual_seed(1)
    rows = torch.randn(4, 6, dtype=torch.float64, generator=generator)
    point = torch.randn(6, dtype=torch.float64, generator=generator)
    eye = torch.eye(6, dtype=torch.float64)
    coefficients = torch.linalg.lstsq(rows.T, point.unsqueeze(1)).solution
    candidates = [*eye, *-eye, point - rows.mean(0), point - (rows.T @ coefficients).squeeze(1)]
    margins = [float((c / c.norm()) @ point - (rows @ (c / c.norm())).max()) for c in candidates]
    best = separating_direction(point, rows)
    assert best.margin == pytest.approx(max(margins), abs=1e-12)
    assert best.margin == pytest.approx(float(best.direction @ point - (rows @ best.direction).max()), abs=1e-12)
    on_axis = separating_direction(torch.tensor([2.0, 0.0]), torch.tensor([[0.0, 0.0], [1.0, 0.0]]))
    assert on_axis.name == "+e_0"  # ties with "point - mean(rows)" (same direction): the first candidate wins
    assert on_axis.margin == 1.0


def test_points_outside_the_hull_are_certified():
    rows = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])  # a triangle
    outside = separating_direction(torch.tensor([1.0, 1.0]), rows)
    # no unit direction can do better than the distance 1/sqrt 2 from (1, 1) to the edge x + y = 1
    assert outside.margin == pytest.approx(1 / math.sqrt(2))
    direction = outside.direction.float()
    assert float(direction @ torch.tensor([1.0, 1.0])) - float((rows @ direction).max()) == pytest.approx(1 / math.sqrt(2))
    off_plane = separating_direction(torch.tensor([0.2, 0.2, 0.3]), torch.cat((rows, torch.zeros(3, 1)), 1))
    assert off_plane.margin == pytest.approx(0.3) and off_plane.name in ("+e_2", "point off span(rows)")
    assert math.isclose(float(off_plane.direction.norm()), 1.0)


def test_bad_inputs_raise(mlp):
    with pytest.raises(ValueError, match="permutation"):
        permutation_error(mlp, torch.randn(1, 3, 16), torch.tensor([0, 0, 1]))
    with pytest.raises(ValueError, match=r"\(B, T, d\)"):
        row_isolation_error(mlp, torch.randn(3, 16), 0)
    with pytest.raises(ValueError, match="position t"):
        row_isolation_error(mlp, torch.randn(1, 3, 16), 3)
    with pytest.raises(ValueError, match="point"):
        separating_direction(torch.randn(3), torch.randn(4, 2))


@pytest.fixture(scope="module")
def trained_mlps():
    """(MLP, what it reads in the model (T, d)) for every layer of the shipped trained course model."""
    model = load_pretrained("shakespeare")
    with torch.no_grad():
        _, cache = run_with_cache(model, encode("First Citizen:\nBefore we proceed any further, hear me speak."))
    return [(block.mlp, cache.ln_2(l)[0]) for l, block in enumerate(model.blocks)]


def without_biases(mlp):  # Definition 2.1 with b_1 and b_2 left out
    return lambda X: F.linear(F.gelu(F.linear(X, mlp.W_1)), mlp.W_2)


def with_tanh_gelu(mlp):  # GPT-2's tanh GELU in place of t Phi(t)
    return lambda X: F.linear(F.gelu(F.linear(X, mlp.W_1, mlp.b_1), approximate="tanh"), mlp.W_2, mlp.b_2)


@torch.no_grad()
def test_mlp_by_rows_is_definition_2_1_written_out_in_float64(trained_mlps):
    mlp, X = trained_mlps[1]
    pre = X.double() @ mlp.W_1.double().T + mlp.b_1.double()  # (T, d_ff)
    by_hand = (pre * 0.5 * (1 + torch.erf(pre / math.sqrt(2)))) @ mlp.W_2.double().T + mlp.b_2.double()  # (T, d)
    torch.testing.assert_close(mlp_by_rows(mlp, X).double(), by_hand, atol=1e-4, rtol=1e-5)


@torch.no_grad()
def test_the_definition_check_passes_the_module_and_fails_a_bias_free_mlp_and_the_tanh_gelu(trained_mlps):
    """On trained weights (non-zero biases, gains away from 1, pre-activations of several units) the
    two wrong maps miss Definition 2.1 by far more than the bar the module meets."""
    for mlp, X in trained_mlps:
        assert definition_error(mlp, mlp, X) <= 1e-5
        assert definition_error(without_biases(mlp), mlp, X) > 1e-3
        assert definition_error(with_tanh_gelu(mlp), mlp, X) > 3e-5


@torch.no_grad()
def test_at_initialization_the_check_could_not_tell_them_apart(course_model):
    """Why the notebook runs it on the trained model: at initialization the biases are 0 and the
    pre-activations small, so both wrong maps pass the same bar."""
    mlp = course_model.blocks[0].mlp
    X = torch.nn.functional.layer_norm(torch.randn(16, COURSE_CONFIG.d) * 0.02, (COURSE_CONFIG.d,))
    for wrong in (without_biases(mlp), with_tanh_gelu(mlp)):
        assert definition_error(wrong, mlp, X) <= 1e-5


def test_mlp_by_rows_refuses_a_batch(mlp):
    with pytest.raises(ValueError, match=r"X must be one sequence of shape \(T, d\) with d = 16"):
        mlp_by_rows(mlp, torch.randn(1, 4, 16))
