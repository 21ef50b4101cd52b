"""Exercise 7: the post-norm block Jacobian and the statement of where it departs from I + DF."""

import pytest
import torch

from gptlib.exercises import check_post_norm_jacobian, check_post_norm_statement, solutions, statements
from gptlib.exercises.result import ERROR, FAILED, NOT_ATTEMPTED

pytestmark = pytest.mark.usefixtures("one_thread")


def jacobian_of(fn):
    """A learner's Jacobian of X -> fn(block, X) by autograd, position-major."""

    def learner(block, X):
        T, d = X.shape
        return torch.autograd.functional.jacobian(lambda x: fn(block, x.reshape(1, T, d)).reshape(-1), X.reshape(-1))

    return learner


def pre_norm(block, Z):
    Y = Z + block.attn(block.ln_1(Z))
    return Y + block.mlp(block.ln_2(Y))


def no_final_norm(block, Z):
    Y = block.ln_1(Z + block.attn(Z))
    return Y + block.mlp(Y)


def no_residual(block, Z):
    return block.ln_2(block.mlp(block.ln_1(block.attn(Z))))


def test_the_statement_is_read_loosely_and_listed():
    assert check_post_norm_statement(" B ").passed
    assert "(b)" in statements()


@pytest.mark.parametrize(
    "learner, message",
    [
        (jacobian_of(pre_norm), "pre-norm block's Jacobian I + DF"),
        (jacobian_of(no_final_norm), "left out LN_2"),
        (jacobian_of(no_residual), "left out the residual additions"),
        (lambda block, X: solutions.post_norm_jacobian(block, X).T, "transposed"),
    ],
)
def test_typical_jacobian_mistakes_are_named(learner, message):
    r = check_post_norm_jacobian(learner)
    assert r.status == FAILED and message in r.message


def test_feature_major_flattening_is_named():
    def feature_major(block, X):
        T, d = X.shape

        def f(x):  # x: the columns of X stacked, (d T,)
            Z = x.reshape(d, T).T.reshape(1, T, d)
            Y = block.ln_1(Z + block.attn(Z))
            return block.ln_2(Y + block.mlp(Y))[0].T.reshape(-1)

        return torch.autograd.functional.jacobian(f, X.T.reshape(-1))

    r = check_post_norm_jacobian(feature_major)
    assert r.status == FAILED and "feature-major" in r.message


def test_wrong_statements_are_answered_and_junk_refused():
    for letter, message in (("a", "multiplies the whole of I + DF"), ("c", "still there"), ("d", "not a constant")):
        r = check_post_norm_statement(letter)
        assert r.status == FAILED and message in r.message
    r = check_post_norm_statement("e")
    assert r.status == FAILED and "one letter" in r.message


def test_placeholder_crash_and_shape():
    r = check_post_norm_statement(None)  # the scaffold's placeholder
    assert r.status == NOT_ATTEMPTED and "no statement chosen yet" in r.message
    r = check_post_norm_jacobian(lambda block, X: block.missing_part(X))
    assert r.status == ERROR and "AttributeError" in r.message
    r = check_post_norm_jacobian(lambda block, X: torch.eye(3))
    assert r.status == FAILED and "should have shape (24, 24)" in r.message


def test_a_jacobian_computed_in_float32_is_accepted():
    assert check_post_norm_jacobian(lambda block, X: solutions.post_norm_jacobian(block.float(), X.float())).passed
