"""Block Jacobians against central finite differences in float64, and the Section 3 measurements."""

import pytest
import torch

from gptlib import encode, jacobians


def finite_difference_jacobian(fn, X, h=1e-6):
    """Central differences, column by column: (f(x + h e_j) - f(x - h e_j)) / 2h."""
    x = X.reshape(-1)
    columns = []
    for j in range(x.numel()):
        e = torch.zeros_like(x)
        e[j] = h
        plus = fn((x + e).reshape(1, *X.shape)).reshape(-1)
        minus = fn((x - e).reshape(1, *X.shape)).reshape(-1)
        columns.append((plus - minus) / (2 * h))
    return torch.stack(columns, dim=1)


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
    model, X = sharp_model("post", ln_eps=0.0)  # eps = 0: the radial direction is killed exactly
    with pytest.raises(ValueError, match="pre-norm"):
        jacobians.residual_branch(model.blocks[0], X.unsqueeze(0))
    J = jacobians.block_jacobian(model.blocks[0], X)
    T, d = X.shape
    # LN_2's Jacobian at each position kills the all-ones direction and the radial direction
    assert torch.linalg.matrix_rank(J) == T * (d - 2)


def test_product_of_block_jacobians_is_the_end_to_end_jacobian(sharp_model):
    model, X = sharp_model("pre")
    product = jacobians.product_of_jacobians(jacobians.stack_jacobians(model.blocks, X))

    def stack(Z):
        for block in model.blocks:
            Z = block(Z, explicit=True)
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
    assert [row["L"] for row in rows] == [1, 3]
    assert rows[1]["singular_values"].shape == (3 * 8,)
    assert rows[1]["gradient_norms"].shape == (4,)
    with pytest.raises(ValueError, match="T \\+ 1"):
        jacobians.depth_study("pre", [1], T=20, text="short")


def test_block_jacobian_refuses_a_batch(sharp_model):
    model, X = sharp_model("pre")
    with pytest.raises(ValueError, match="one sequence of shape"):
        jacobians.block_jacobian(model.blocks[0], X.unsqueeze(0))
