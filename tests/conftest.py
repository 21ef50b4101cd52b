import pytest
import torch

from gptlib import COURSE_CONFIG, GPT


@pytest.fixture(autouse=True)
def _seeded():
    torch.manual_seed(0)


@pytest.fixture
def course_model():
    return GPT(COURSE_CONFIG).eval()
