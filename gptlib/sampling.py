"""Sampling text from a GPT: draw x_{t+1} from softmax(z_t / temperature) (Section 5's logits).

Temperature below 1 sharpens the distribution toward the most likely character, above 1
flattens it toward uniform; as it goes to 0 sampling becomes greedy argmax decoding.
The context fed to the model is the last T_max tokens.
"""

from __future__ import annotations

import torch

from .model import GPT


def next_token_probabilities(model: GPT, ids: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """softmax(z_T / temperature) (V,) for the token after the 1-D ids, seeing at most T_max of them."""
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature!r}")
    with torch.no_grad():
        logits = model(ids[-model.config.T_max :])  # (T, V)
    return torch.softmax(logits[-1].double() / temperature, dim=-1)  # (V,), double so tiny temperatures stay finite


def sample(model: GPT, prompt: torch.Tensor, new_tokens: int, temperature: float = 1.0,
           generator: torch.Generator | None = None) -> torch.Tensor:
    """The 1-D prompt ids followed by new_tokens sampled ids (prompt length + new_tokens,).

    Pass a seeded torch.Generator for a reproducible sample.
    """
    if prompt.dim() != 1 or len(prompt) == 0:
        raise ValueError(f"prompt must be a non-empty 1-D tensor of ids, got shape {tuple(prompt.shape)}")
    if new_tokens < 0:
        raise ValueError(f"new_tokens must be >= 0, got {new_tokens}")
    was_training = model.training
    model.eval()
    ids = prompt.clone()
    for _ in range(new_tokens):
        probabilities = next_token_probabilities(model, ids, temperature)
        choice = torch.multinomial(probabilities, 1, generator=generator)  # (1,)
        ids = torch.cat([ids, choice])
    model.train(was_training)
    return ids
