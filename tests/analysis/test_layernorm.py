"""gptlib.analysis.layernorm against torch's own norms and hand formulas (Lecture 5, Section 4)."""

import math
import re

import pytest
import torch
import torch.nn.functional as F

from gptlib.analysis import layernorm


def test_layer_norm_matches_torch_with_gamma_and_beta():
    u = torch.randn(4, 6, 32, dtype=torch.float64) * 3 + 1
    gamma, beta = torch.randn(32, dtype=torch.float64), torch.randn(32, dtype=torch.float64)
    expected = F.layer_norm(u, (32,), gamma, beta, eps=1e-5)
    torch.testing.assert_close(layernorm.layer_norm(u, gamma, beta, eps=1e-5), expected)


def test_a_wrong_layer_norm_would_be_caught():
    # the unbiased variance (dividing by d - 1) is a common mistake; the reference tells it apart
    u = torch.randn(5, 16, dtype=torch.float64)
    wrong = (u - u.mean(-1, keepdim=True)) / u.std(-1, unbiased=True, keepdim=True)
    assert not torch.allclose(wrong, F.layer_norm(u, (16,), eps=0.0))
    torch.testing.assert_close(layernorm.layer_norm(u), F.layer_norm(u, (16,), eps=0.0))


def test_rms_norm_matches_torch_rmsnorm():
    u = torch.randn(3, 24, dtype=torch.float64) + 0.5
    reference = torch.nn.RMSNorm(24, eps=1e-3, dtype=torch.float64)
    with torch.no_grad():
        reference.weight.normal_()
    expected = reference(u)
    torch.testing.assert_close(layernorm.rms_norm(u, reference.weight.detach(), eps=1e-3), expected.detach())


def test_rms_norm_is_the_radial_step_alone():
    # Aside 4.4: without centering, RMSNorm = LayerNorm exactly when the input is already in 1-perp
    u = torch.randn(10, 8, dtype=torch.float64)
    v = layernorm.center(u)
    torch.testing.assert_close(layernorm.rms_norm(v), layernorm.layer_norm(u))
    assert not torch.allclose(layernorm.rms_norm(u), layernorm.layer_norm(u))


def test_centering_matrix_hand_formula_and_projector_facts():
    d = 7
    P = layernorm.centering_matrix(d)
    u = torch.randn(d, dtype=torch.float64)
    torch.testing.assert_close(P @ u, u - u.sum() / d)  # the hand formula u - mean(u) 1
    torch.testing.assert_close(layernorm.center(u), P @ u)
    facts = layernorm.projector_facts(d)
    assert facts.self_adjoint < 1e-15 and facts.idempotent < 1e-15
    assert facts.ones_in_kernel < 1e-14 and facts.image_is_ones_perp < 1e-14
    assert facts.kernel_dim == 1 and facts.rank == d - 1
    oblique = layernorm.projector_facts(d, lambda v: v - v[..., :1])  # idempotent, kernel 1, but not orthogonal
    assert oblique.idempotent < 1e-15 and oblique.ones_in_kernel < 1e-14 and oblique.kernel_dim == 1  # P 1 = 0
    assert oblique.self_adjoint > 0.5 and oblique.image_is_ones_perp > 0.5


@pytest.mark.parametrize("d", [2, 3, 128])
def test_proposition_4_2_image_is_the_sphere_in_ones_perp(d):
    U = torch.randn(2000, d, dtype=torch.float64) * torch.rand(2000, 1, dtype=torch.float64) * 10
    facts = layernorm.image_facts(U)
    assert facts.max_abs_coordinate_sum < 1e-10
    assert facts.max_norm_error < 1e-10
    # with eps > 0 the outputs fall inside the sphere, which the check notices
    assert layernorm.image_facts(U * 1e-3, eps=1e-5).max_norm_error > 1e-3


def test_radial_rescale_is_sqrt_d_over_norm():
    v = torch.randn(5, 9, dtype=torch.float64)
    expected = math.sqrt(9) * v / torch.linalg.vector_norm(v, dim=-1, keepdim=True)
    torch.testing.assert_close(layernorm.radial_rescale(v), expected)


def test_scale_invariance_exact_without_eps_and_broken_near_zero_variance():
    u = torch.randn(64, dtype=torch.float64)
    scales = torch.tensor([1e-6, 0.01, 3.0, 1e4], dtype=torch.float64)
    assert layernorm.scale_invariance_gap(u, scales, eps=0.0).max() < 1e-12
    gaps = layernorm.scale_invariance_gap(u, scales, eps=1e-5)
    assert gaps[0] > 0.5 and gaps[-1] < 1e-4  # tiny c: eps dominates; large c: invariance restored
    with pytest.raises(ValueError, match="c > 0"):
        layernorm.scale_invariance_gap(u, torch.tensor([-1.0], dtype=torch.float64), eps=0.0)


def test_output_norm_against_sigma_closed_form():
    d, eps = 16, 1e-3
    sigmas = torch.logspace(-4, 1, 20, dtype=torch.float64)
    closed_form = math.sqrt(d) * sigmas / torch.sqrt(sigmas**2 + eps)
    torch.testing.assert_close(layernorm.output_norm_against_sigma(d, sigmas, eps), closed_form)
    torch.testing.assert_close(layernorm.output_norm_against_sigma(d, sigmas, 0.0), torch.full_like(sigmas, math.sqrt(d)))


def test_vector_with_sigma_has_that_sigma():
    sigmas = torch.tensor([0.1, 2.0], dtype=torch.float64)
    rows = layernorm.vector_with_sigma(torch.randn(10, dtype=torch.float64), sigmas)
    torch.testing.assert_close(layernorm.sigma(rows), sigmas)
    torch.testing.assert_close(layernorm.sigma(rows), rows.std(-1, unbiased=False))
    with pytest.raises(ValueError, match="nonconstant"):
        layernorm.vector_with_sigma(torch.ones(4, dtype=torch.float64), sigmas)


@pytest.mark.parametrize("eps", [0.0, 1e-5])
def test_constant_and_zero_vectors_give_beta_not_nan(eps):
    U = torch.stack([torch.full((5,), 3.0), torch.zeros(5)])
    beta = torch.arange(5.0)
    U.requires_grad_(True)
    out = layernorm.layer_norm(U, torch.ones(5), beta, eps=eps)
    torch.testing.assert_close(out, beta.expand(2, 5))
    (grad,) = torch.autograd.grad(out.sum(), U)
    assert torch.isfinite(grad).all()
    assert torch.isfinite(layernorm.rms_norm(torch.zeros(3), eps=eps)).all()


def test_batch_norm_matches_torch_and_depends_on_the_batch():
    U = torch.randn(6, 10, dtype=torch.float64)
    expected = F.batch_norm(U, None, None, training=True, eps=1e-5)
    torch.testing.assert_close(layernorm.batch_norm(U, eps=1e-5), expected)
    other = torch.cat([U[:1], torch.randn(5, 10, dtype=torch.float64)])
    assert not torch.allclose(layernorm.batch_norm(other)[0], layernorm.batch_norm(U)[0])
    torch.testing.assert_close(layernorm.layer_norm(other)[0], layernorm.layer_norm(U)[0])
    with pytest.raises(ValueError, match="at least 2 examples"):
        layernorm.batch_norm(U[:1])


def test_weight_decay_before_layernorm_keeps_function_and_scales_gradient():
    W = torch.randn(8, 5, dtype=torch.float64)
    X = torch.randn(12, 5, dtype=torch.float64)
    readout = torch.randn(12, 8, dtype=torch.float64)
    scales = torch.tensor([1.0, 0.5, 0.1, 4.0], dtype=torch.float64)
    result = layernorm.weight_scale_before_layernorm(W, X, readout, scales)
    assert result.output_change.max() < 1e-12
    torch.testing.assert_close(result.grad_norm_times_c, result.grad_norm[0].expand(4))
    # independent check of the 1/c law: finite differences of the loss along one coordinate of cW
    for c in (0.5, 4.0):
        h = 1e-6
        E = torch.zeros_like(W)
        E[2, 3] = 1.0
        loss = lambda M: (layernorm.layer_norm(X @ M.T) * readout).sum()
        numeric = (loss(c * W + h * E) - loss(c * W - h * E)) / (2 * h)
        numeric_at_1 = (loss(W + h * E) - loss(W - h * E)) / (2 * h)
        torch.testing.assert_close(numeric * c, numeric_at_1, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("bad", [torch.arange(4), torch.tensor(1.0)])
def test_bad_input_is_refused(bad):
    with pytest.raises(ValueError):
        layernorm.layer_norm(bad)


def test_negative_or_infinite_eps_is_refused():
    with pytest.raises(ValueError, match=re.escape("eps must be a finite number >= 0, got -1.0")):
        layernorm.layer_norm(torch.randn(3), eps=-1.0)
    with pytest.raises(ValueError, match=re.escape("eps must be a finite number >= 0, got inf")):
        layernorm.radial_rescale(torch.randn(3), eps=float("inf"))


@pytest.mark.parametrize("d", [3, 8, 64])
def test_layer_norm_jacobian_is_the_closed_form_of_rank_d_minus_2(d):
    # d LN / du = (P - v v^T / (d s^2)) / s with v = u - mean(u) 1, s = sqrt(|v|^2 / d + eps), P = I - 11^T / d
    u = torch.randn(d, dtype=torch.float64) * 2 + 0.5
    v = u - u.mean()
    P = torch.eye(d, dtype=torch.float64) - 1 / d
    for eps, rank in ((0.0, d - 2), (1e-3, d - 1)):
        s = math.sqrt(v.dot(v) / d + eps)
        closed_form = (P - torch.outer(v, v) / (d * s**2)) / s
        J = layernorm.layer_norm_jacobian(u, eps)
        torch.testing.assert_close(J, closed_form)
        assert torch.linalg.matrix_rank(J).item() == rank  # Proposition 4.2: a (d-2)-dimensional image when eps = 0
    torch.testing.assert_close(J @ torch.ones(d, dtype=torch.float64), torch.zeros(d, dtype=torch.float64))


def test_layer_norm_jacobian_refuses_a_batch():
    with pytest.raises(ValueError, match="one row"):
        layernorm.layer_norm_jacobian(torch.randn(2, 4, dtype=torch.float64))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_huge_inputs_normalize_by_the_closed_form_instead_of_overflowing(dtype):
    # u = (M, 0, 0): mean M/3, centred M (2, -1, -1)/3, sigma = M sqrt(2)/3, so LN(u) = (2, -1, -1)/sqrt(2) for any M > 0;
    # u = (M, M, 0) gives (1, 1, -2)/sqrt(2). Squaring M = 1e200 (1e30 in float32) overflows to inf.
    big = torch.finfo(dtype).max / 2
    root2 = math.sqrt(2)
    for M in (1e30, big):
        for u, expected in (((M, 0.0, 0.0), (root2, -1 / root2, -1 / root2)), ((M, M, 0.0), (1 / root2, 1 / root2, -root2))):
            for eps in (0.0, 1e-5):  # eps is negligible next to sigma^2 ~ M^2
                out = layernorm.layer_norm(torch.tensor(u, dtype=dtype), eps=eps)
                torch.testing.assert_close(out, torch.tensor(expected, dtype=dtype))
        assert math.isclose(float(layernorm.sigma(torch.tensor((M, 0.0, 0.0), dtype=dtype))), M * root2 / 3, rel_tol=1e-6)


@pytest.mark.parametrize("c", [1e200, 1e-200, 1e300, 1e-300])
def test_layer_norm_and_sigma_of_scaled_rows_match_torch_on_the_unscaled_rows(c):
    # Remark 4.3 with eps = 0: LN(c u) = LN(u) and sigma(c u) = c sigma(u), computed by torch on u where nothing overflows
    u = torch.randn(6, 16, dtype=torch.float64) + 0.5
    torch.testing.assert_close(layernorm.layer_norm(c * u), F.layer_norm(u, (16,), eps=0.0))
    torch.testing.assert_close(layernorm.sigma(c * u), c * u.std(-1, unbiased=False))
    torch.testing.assert_close(layernorm.rms_norm(c * u, eps=0.0), torch.nn.functional.rms_norm(u, (16,), eps=0.0))
    # with eps > 0, Definition 4.1 c (u - mean(u)) / sqrt(c^2 sigma(u)^2 + eps), for c > 1 divided through by c first
    eps = 0.01
    centred, sigma = u - u.mean(-1, keepdim=True), u.std(-1, unbiased=False, keepdim=True)
    if c > 1:
        expected = centred / torch.sqrt(sigma**2 + eps / c / c)  # eps / c^2 underflows to 0: LN(u) itself
    else:
        expected = c * centred / torch.sqrt(c**2 * sigma**2 + eps)  # c^2 sigma^2 underflows to 0: c (u - mean) / sqrt(eps)
    torch.testing.assert_close(layernorm.layer_norm(c * u, eps=eps), expected)


def test_layer_norm_jacobian_at_a_huge_row_is_the_jacobian_at_the_row_over_c():
    # LN(c u) = LN(u) for c > 0, so the chain rule gives dLN/du at c u = (dLN/du at u) / c
    u = torch.randn(5, dtype=torch.float64)
    c = 1e200
    torch.testing.assert_close(layernorm.layer_norm_jacobian(c * u) * c, layernorm.layer_norm_jacobian(u))


def test_subnormal_rows_normalize_like_ordinary_ones():
    # 3e-320 and 1e-320 are subnormal: their squares are 0 in float64, yet LN only sees their ratio
    u = torch.tensor([3e-320, 0.0, 1e-320], dtype=torch.float64)
    ratio = u / u[0]  # exact enough: (1, 0, ~1/3) in ordinary floats
    torch.testing.assert_close(layernorm.layer_norm(u), F.layer_norm(ratio, (3,), eps=0.0))
    assert float(layernorm.sigma(u)) > 0


def test_a_coordinatewise_gain_turns_the_sphere_into_an_ellipsoid():
    """Remark 4.3: gamma * LN(u) + beta lies on gained_sphere's ellipsoid; its semi-axes are the extreme
    distances from beta of the gained circle, measured here on a fine grid of the circle itself."""
    gamma = torch.tensor([2.0, 1.0, 0.5], dtype=torch.float64)
    beta = torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64)
    image = layernorm.gained_sphere(gamma, beta)
    basis = torch.tensor([[1.0, -1.0, 0.0], [1.0, 1.0, -2.0]], dtype=torch.float64)
    basis = basis / basis.norm(dim=1, keepdim=True)  # an orthonormal basis of 1-perp, written independently
    angles = torch.linspace(0, 2 * math.pi, 100_001, dtype=torch.float64)
    circle = math.sqrt(3) * (torch.cos(angles)[:, None] * basis[0] + torch.sin(angles)[:, None] * basis[1])  # (n, 3)
    distances = (gamma * circle).norm(dim=1)
    assert image.semi_axes.tolist() == pytest.approx([float(distances.max()), float(distances.min())], rel=1e-9)
    assert image.semi_axes[0] > 2 * image.semi_axes[1]  # not a circle
    assert float(image.residual(gamma * circle + beta).max()) < 1e-12
    U = torch.randn(500, 3, dtype=torch.float64) * torch.logspace(-2, 2, 500, dtype=torch.float64)[:, None]
    assert float(image.residual(layernorm.layer_norm(U, gamma, beta)).max()) < 1e-12
    # gamma left out: the circle meets the ellipse in four points only, so most outputs are far off it
    assert float(image.residual(layernorm.layer_norm(U) + beta).median()) > 0.2
    assert float(image.residual(layernorm.layer_norm(U, gamma)).min()) > 0.05  # beta left out: off the ellipse's plane


@pytest.mark.parametrize("d", [3, 5, 16])
def test_only_a_constant_gain_keeps_the_sphere_round(d):
    constant = layernorm.gained_sphere(torch.full((d,), -1.5, dtype=torch.float64))
    torch.testing.assert_close(constant.semi_axes, torch.full((d - 1,), 1.5 * math.sqrt(d), dtype=torch.float64))
    gamma = torch.linspace(0.5, 2.0, d, dtype=torch.float64)
    image = layernorm.gained_sphere(gamma)
    assert image.semi_axes.shape == (d - 1,) and float(image.semi_axes[0] / image.semi_axes[-1]) > 1.2
    U = torch.randn(200, d, dtype=torch.float64)
    assert float(image.residual(layernorm.layer_norm(U, gamma)).max()) < 1e-12


def test_gained_sphere_refuses_bad_gains():
    with pytest.raises(ValueError, match="no zero coordinate"):
        layernorm.gained_sphere(torch.tensor([1.0, 0.0, 2.0], dtype=torch.float64))
    with pytest.raises(ValueError, match=r"one vector \(d,\) with d >= 2"):
        layernorm.gained_sphere(torch.ones(2, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"beta must be a vector of shape \(d,\) = \(3,\)"):
        layernorm.gained_sphere(torch.ones(3, dtype=torch.float64), torch.zeros(4, dtype=torch.float64))
