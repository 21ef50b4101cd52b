"""Exercise 4: LayerNorm as projection + radial rescaling, and weight decay before a LayerNorm."""

import pytest
import torch

from gptlib.exercises import check_layer_norm, check_weight_decay, solutions
from gptlib.exercises.result import ERROR, FAILED, NOT_ATTEMPTED

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize(
    "rescale, message",
    [
        (lambda v, eps: v / torch.sqrt(v.var(dim=-1, keepdim=True) + eps), "unbiased variance"),
        (lambda v, eps: v / (v.pow(2).mean(-1, keepdim=True).sqrt() + eps), "eps sits outside the square root"),
        (lambda v, eps: v / (v.std(dim=-1, keepdim=True) + eps), "unbiased variance AND eps outside"),
        (lambda v, eps: v / torch.linalg.vector_norm(v, dim=-1, keepdim=True), "unit sphere"),
        (lambda v, eps: v / (v.pow(2).mean(-1, keepdim=True) + eps), "variance instead of its square root"),
        (lambda v, eps: v / v.pow(2).mean(-1, keepdim=True).sqrt(), "eps is ignored"),
    ],
)
def test_typical_rescaling_mistakes_are_named(rescale, message):
    r = check_layer_norm(solutions.project, rescale)
    assert r.status == FAILED and message in r.message


@pytest.mark.parametrize(
    "project, message",
    [
        (lambda u: u, "RMSNorm"),
        (lambda u: u - u.mean(dim=0, keepdim=True), "wrong dimension"),
        (lambda u: u - u.mean(), "whole tensor"),
        (lambda u: torch.nn.functional.layer_norm(u, u.shape[-1:], eps=0.0), "also rescales"),
    ],
)
def test_typical_projection_mistakes_are_named(project, message):
    r = check_layer_norm(project, solutions.rescale)
    assert r.status == FAILED and message in r.message


def test_stub_crash_and_wrong_shape():
    def stub(*args):
        raise NotImplementedError

    assert check_layer_norm(stub, solutions.rescale).status == NOT_ATTEMPTED
    assert check_layer_norm(solutions.project, stub).status == NOT_ATTEMPTED
    r = check_layer_norm(lambda u: u.mean(dim=-1), solutions.rescale)
    assert r.status == FAILED and "should have shape" in r.message
    r = check_layer_norm(lambda u: u.numpy().mean(), solutions.rescale)
    assert r.status == FAILED and "torch.Tensor" in r.message
    r = check_layer_norm(solutions.project, lambda v, eps: v / undefined_name)  # noqa: F821
    assert r.status == ERROR and "NameError" in r.message


@pytest.mark.parametrize(
    "predict, message",
    [
        (lambda c: (1.0, 1.0 / c**2), "the gradient does"),
        (lambda c: (c, 1.0), "LARGER gradient"),
        (lambda c: (1 / c, 1 / c), "relative to ||cW||"),
        (lambda c: (1 / c**2, 1 / c), "swapped"),
    ],
)
def test_typical_weight_decay_predictions_are_named(predict, message):
    r = check_weight_decay(predict)
    assert r.status == FAILED and message in r.message


def test_weight_decay_answer_shape():
    r = check_weight_decay(lambda c: 1 / c)
    assert r.status == FAILED and "pair" in r.message
    r = check_weight_decay(lambda c: (torch.tensor(1 / c), torch.tensor(1 / c**2)))
    assert r.passed


def test_moves_computed_in_float32_are_accepted():
    assert check_layer_norm(lambda u: solutions.project(u.float()), lambda v, eps: solutions.rescale(v.float(), eps)).passed
