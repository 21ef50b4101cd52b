"""gptlib.sampling: tiny temperature is greedy decoding, a seeded generator reproduces, input is checked."""

import pytest
import torch

from gptlib import GPT, data
from gptlib.induction import INDUCTION_CONFIG
from gptlib.sampling import next_token_probabilities, sample


def test_sampling_at_tiny_temperature_is_greedy_decoding():
    model = GPT(INDUCTION_CONFIG.replace(attn_only=False, L=1)).eval()
    prompt = data.encode("ROMEO:")
    ids = sample(model, prompt, 10, temperature=1e-4, generator=torch.Generator().manual_seed(0))
    greedy = prompt.clone()
    for _ in range(10):  # independent greedy loop
        with torch.no_grad():
            greedy = torch.cat([greedy, model(greedy[-model.config.T_max :])[-1].argmax().view(1)])
    assert torch.equal(ids, greedy)


def test_sampling_is_reproducible_and_checks_its_input():
    model = GPT(INDUCTION_CONFIG.replace(attn_only=False, L=1)).eval()
    prompt = data.encode("To be")
    a = sample(model, prompt, 20, temperature=1.0, generator=torch.Generator().manual_seed(5))
    b = sample(model, prompt, 20, temperature=1.0, generator=torch.Generator().manual_seed(5))
    assert torch.equal(a, b) and torch.equal(a[:5], prompt) and len(a) == 25
    probabilities = next_token_probabilities(model, prompt, temperature=2.0)
    with torch.no_grad():
        expected = torch.softmax(model(prompt)[-1].double() / 2.0, -1)
    assert torch.allclose(probabilities, expected) and probabilities.sum().item() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="temperature"):
        sample(model, prompt, 3, temperature=0.0)
    with pytest.raises(ValueError, match="1-D"):
        sample(model, prompt.view(1, -1), 3)
