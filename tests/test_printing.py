"""gptlib.printing: compared outputs print verdicts and coarse values, never rounding-level digits."""

import torch

from gptlib.printing import coarse, verdict


def test_coarse_hides_digits_under_the_floor_only():
    assert coarse(3.1e-15) == coarse(torch.tensor(0.0)) == "< 1e-12"
    assert coarse(2e-11, 1e-10) == "< 1e-10"
    assert coarse(1e-12) == "1.0e-12"
    assert coarse(torch.tensor(3.2e-4)) == "3.2e-04"
    assert coarse(float("nan")) == "nan"


def test_verdict_prints_a_verdict_not_the_digits():
    assert verdict(2.2e-8, 1e-5) == verdict(1.3e-8, 1e-5) == "<= 1e-05: yes"
    assert verdict(1e-5, 1e-5) == "<= 1e-05: yes"
    assert verdict(torch.tensor(3.2e-4), 1e-5) == "<= 1e-05: NO, it is 3.2e-04"
    assert verdict(float("nan"), 1e-5) == "<= 1e-05: NO, it is nan"


def test_verdict_takes_a_tensor_that_requires_grad_without_a_warning(recwarn):
    assert verdict(torch.ones(3, requires_grad=True).sum() * 0, 1e-6) == "<= 1e-06: yes"
    assert len(recwarn) == 0
