"""Block Jacobians against central finite differences in float64, and the Section 3 measurements."""

import pytest
import torch

from gptlib import encode
from gptlib.analysis import jacobians
from gptlib.analysis.jacobians import finite_difference_jacobian
from gptlib.export import stacked_heads
from gptlib.model import attention_matrices_formed
from tests.support.learner_gpts import ScratchBlock


def test_finite_differences_match_closed_forms():
    torch.manual_seed(0)
    X, M = torch.randn(3, 4, dtype=torch.float64), torch.randn(4, 4, dtype=torch.float64)
    linear = finite_difference_jacobian(lambda Z: Z @ M, X)  # rows times M: kron(I_T, M^T), vec row by row
    torch.testing.assert_close(linear, torch.kron(torch.eye(3, dtype=torch.float64), M.T.contiguous()), rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(finite_difference_jacobian(lambda Z: Z**3, X), torch.diag(3 * X.reshape(-1) ** 2))


def test_branch_by_definition_is_the_recorded_branch_and_only_a_residual_block_has_j_equal_i_plus_df(sharp_model):
    model, X = sharp_model("pre")
    block = model.blocks[1]
    F = jacobians.branch_by_definition(block)
    with torch.no_grad():
        torch.testing.assert_close(F(X.unsqueeze(0)), jacobians.residual_branch(block, X.unsqueeze(0)))
    identity_plus_DF = torch.eye(X.numel(), dtype=X.dtype) + jacobians.jacobian_of(F, X)
    torch.testing.assert_close(finite_difference_jacobian(block, X), identity_plus_DF, rtol=1e-6, atol=1e-7)
    half_skip = finite_difference_jacobian(lambda Z: 0.5 * Z + F(Z), X)  # not of the form X + F(X)
    torch.testing.assert_close((identity_plus_DF - half_skip).diagonal(), torch.full((X.numel(),), 0.5, dtype=X.dtype))
    with pytest.raises(ValueError, match="pre-norm block with an MLP"):
        jacobians.branch_by_definition(sharp_model("post")[0].blocks[0])


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_block_jacobian_matches_finite_differences(norm, sharp_model):
    model, X = sharp_model(norm)
    block = model.blocks[0]
    J = jacobians.block_jacobian(block, X)
    with torch.no_grad():
        numeric = finite_difference_jacobian(block, X)
    torch.testing.assert_close(J, numeric, rtol=1e-6, atol=1e-7)
    assert not torch.allclose(J.T, numeric, rtol=1e-3, atol=1e-4)  # a transposed Jacobian would be caught


def test_pre_norm_block_jacobian_is_identity_plus_branch_jacobian(sharp_model):
    model, X = sharp_model("pre")
    block = model.blocks[1]
    J = jacobians.block_jacobian(block, X)
    DF = jacobians.branch_jacobian(block, X)
    torch.testing.assert_close(J, torch.eye(J.shape[0], dtype=J.dtype) + DF)
    assert (DF.abs().max() > 0.1)  # the branch is not trivially zero, so the identity is tested
    with torch.no_grad():
        numeric_DF = finite_difference_jacobian(lambda Z: jacobians.residual_branch(block, Z), X)
    torch.testing.assert_close(DF, numeric_DF, rtol=1e-6, atol=1e-7)


def test_post_norm_has_no_residual_branch_and_loses_two_directions_per_position(sharp_model):
    model, X = sharp_model("post")  # eps = 1e-5 > 0, as every model's LayerNorm has
    with pytest.raises(ValueError, match="pre-norm"):
        jacobians.residual_branch(model.blocks[0], X.unsqueeze(0))
    J = jacobians.block_jacobian(model.blocks[0], X)
    T, d = X.shape
    s = torch.linalg.svdvals(J) / torch.linalg.matrix_norm(J, ord=2)  # relative singular values, descending
    # LN_2's Jacobian at each position kills the all-ones direction (centering) exactly, and the radial
    # direction (scale invariance) up to eps: damped by eps / (sigma^2 + eps), not removed
    kept, radial, ones = s[: T * (d - 2)], s[T * (d - 2) : T * (d - 1)], s[T * (d - 1) :]
    assert kept.min() > 1e-3 and 1e-13 < radial.min() and radial.max() < 1e-8 and ones.max() < 1e-13


def test_product_of_block_jacobians_is_the_end_to_end_jacobian(sharp_model):
    model, X = sharp_model("pre")
    product = jacobians.product_of_jacobians(jacobians.stack_jacobians(model.blocks, X))

    def stack(Z):
        with attention_matrices_formed(model):
            for block in model.blocks:
                Z = block(Z)
        return Z

    torch.testing.assert_close(product, jacobians.jacobian_of(stack, X))


def test_layer_gradient_norms_match_autograd_through_the_model(sharp_model):
    model, _ = sharp_model("pre")
    tokens = encode("hello!")
    idx, targets = tokens[:-1], tokens[1:]
    norms = jacobians.layer_gradient_norms(model, idx, targets)
    assert norms.shape == (model.config.L + 1,)
    # independent: X^(0) = E[x] + P[:T], so d loss / d P[:T] is the gradient at X^(0)
    model.zero_grad()
    _, loss = model(idx, targets)
    loss.backward()
    torch.testing.assert_close(torch.linalg.vector_norm(model.P.grad[: len(idx)]), norms[0])


def test_depth_study_shapes_and_identity_path():
    rows = jacobians.depth_study("pre", [1, 3], d=8, T=3, H=2)
    assert [row.L for row in rows] == [1, 3]
    assert rows[1].singular_values.shape == (3 * 8,)
    assert rows[1].gradient_norms.shape == (4,)
    with pytest.raises(ValueError, match="T \\+ 1"):
        jacobians.depth_study("pre", [1], T=20, text="short")


def test_block_and_stack_jacobians_refuse_a_batch(sharp_model):
    model, X = sharp_model("pre")
    with pytest.raises(ValueError, match="one sequence of shape"):
        jacobians.block_jacobian(model.blocks[0], X.unsqueeze(0))
    for residual in (True, False):  # stack_jacobians checks its start X0 once, in either mode
        with pytest.raises(ValueError, match="one sequence of shape"):
            jacobians.stack_jacobians(model.blocks, X.unsqueeze(0), residual)
        with pytest.raises(ValueError, match="one sequence of shape"):
            jacobians.stack_jacobians(model.blocks, X[:, :-1], residual)  # wrong width d


def scratch_copy(block):
    """tests/support/learner_gpts' ScratchBlock (plain torch.nn) holding the weights of a gptlib pre-norm block."""
    d, H = block.attn.W_O.shape[0], block.attn.H
    scratch = ScratchBlock(d, H, mask_diagonal=1, unmasked_heads=(), qkv_bias=False, fill=float("-inf")).double()
    with torch.no_grad():
        for mine, theirs in ((block.ln_1, scratch.ln_1), (block.ln_2, scratch.ln_2)):
            theirs.weight.copy_(mine.gamma)
            theirs.bias.copy_(mine.beta)
        W = torch.cat([stacked_heads(w) for w in (block.attn.W_Q, block.attn.W_K, block.attn.W_V)], dim=1)  # (d, 3d)
        scratch.attn.qkv.weight.copy_(W.T)  # [W_Q | W_K | W_V], heads side by side, as nn.Linear's (out, in) weight
        scratch.attn.proj.weight.copy_(block.attn.W_O.T)
        scratch.attn.proj.bias.copy_(block.attn.b_O)
        for mine, theirs in ((block.mlp.W_1, scratch.mlp[0].weight), (block.mlp.b_1, scratch.mlp[0].bias),
                             (block.mlp.W_2, scratch.mlp[2].weight), (block.mlp.b_2, scratch.mlp[2].bias)):
            theirs.copy_(mine)
    return scratch


def test_without_residual_is_the_block_written_from_scratch_minus_its_additions(sharp_model, with_random_weights):
    model, X = sharp_model("pre")
    block = with_random_weights(model.blocks[0], 0.3)  # nonzero gammas, betas and biases too
    scratch = scratch_copy(block)
    Xb = X.unsqueeze(0)  # (1, T, d)
    with torch.no_grad():
        torch.testing.assert_close(block(Xb), scratch(Xb))  # the weights were copied right
        expected = scratch.mlp(scratch.ln_2(scratch.attn(scratch.ln_1(Xb))))
        torch.testing.assert_close(jacobians.without_residual(block)(Xb), expected)


def test_stack_without_residual_multiplies_the_plain_jacobians(sharp_model):
    model, X = sharp_model("pre", L=2)
    plain = [jacobians.without_residual(block) for block in model.blocks]
    J0 = jacobians.jacobian_of(plain[0], X)
    X1 = plain[0](X.unsqueeze(0)).squeeze(0).detach()
    J1 = jacobians.jacobian_of(plain[1], X1)
    stacked = jacobians.stack_jacobians(model.blocks, X, residual=False)
    torch.testing.assert_close(stacked[0], J0)
    torch.testing.assert_close(stacked[1], J1)
    with torch.no_grad():
        numeric = finite_difference_jacobian(lambda Z: plain[1](plain[0](Z)), X)
    torch.testing.assert_close(jacobians.product_of_jacobians(stacked), numeric, rtol=1e-6, atol=1e-7)


def test_without_residual_refuses_a_post_norm_block(sharp_model):
    model, _ = sharp_model("post")
    with pytest.raises(ValueError, match="pre-norm"):
        jacobians.without_residual(model.blocks[0])


def test_residual_contrast_keeps_the_identity_path_and_loses_it_without():
    # Remark 3.3 at initialization: with residual additions the product of L = 6 block Jacobians
    # stays near the identity; the same blocks without them multiply down to almost nothing.
    (row,) = jacobians.residual_contrast([6], d=16, T=3, H=2)
    assert row.residual.shape == row.plain.shape == (3 * 16,)
    assert 0.3 < row.residual.median() < 3
    assert row.plain.median() < 1e-3 * row.residual.median()


@pytest.mark.parametrize("h, words", [(0.0, "got 0.0"), (-1e-6, "got -1e-06"), (float("nan"), "got nan")])
def test_finite_differences_refuse_a_step_that_is_not_a_finite_number_above_0(h, words):
    """h = 0 divided 0 by 0: a Jacobian of NaN, silently."""
    with pytest.raises(ValueError, match=rf"^h must be a finite number > 0, {words}$"):
        finite_difference_jacobian(lambda X: X, torch.zeros(2, 3, dtype=torch.float64), h)
