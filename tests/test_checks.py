"""gptlib.checks: each input kind accepted in its shape, refused with the rule's message otherwise."""

import pytest
import torch

from gptlib import COURSE_CONFIG, GPT, checks


def test_rows_accepts_any_leading_shape_and_refuses_integers_and_scalars():
    checks.check_rows(torch.randn(3))
    checks.check_rows(torch.randn(2, 4, 3))
    with pytest.raises(ValueError, match="floating-point"):
        checks.check_rows(torch.ones(3, dtype=torch.long))
    with pytest.raises(ValueError, match="last \\(feature\\) dimension"):
        checks.check_rows(torch.tensor(1.0), name="v")


def test_batch_wants_three_dimensions_and_the_given_width():
    checks.check_batch(torch.randn(2, 5, 8))
    checks.check_batch(torch.randn(2, 5, 8), d=8)
    with pytest.raises(ValueError, match=r"\(B, T, d\) tensor, got \(5, 8\)"):
        checks.check_batch(torch.randn(5, 8))
    with pytest.raises(ValueError, match="with d=4, got"):
        checks.check_batch(torch.randn(2, 5, 8), d=4)
    with pytest.raises(ValueError, match="got list"):
        checks.check_batch([1.0])


def test_sequence_wants_one_sequence_of_the_given_width():
    checks.check_sequence(torch.randn(5, 8), d=8)
    for bad in (torch.randn(1, 5, 8), torch.randn(5, 4)):
        with pytest.raises(ValueError, match="one sequence of shape"):
            checks.check_sequence(bad, d=8)


def test_token_sequence_wants_one_valid_sequence():
    model = GPT(COURSE_CONFIG.replace(L=1))
    checks.check_token_sequence(model, torch.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match=r"one sequence of token ids \(T,\)"):
        checks.check_token_sequence(model, torch.tensor([[1, 2, 3]]))
    with pytest.raises(ValueError, match=r"\[0, V\)"):
        checks.check_token_sequence(model, torch.tensor([1, 65]))
