"""Sampling text from a GPT: draw x_{t+1} from softmax(z_t / temperature) (Section 5's logits).

Temperature below 1 sharpens the distribution toward the most likely character, above 1
flattens it toward uniform; as it goes to 0 sampling becomes greedy argmax decoding.
The context fed to the model is the last T_max tokens.
"""

from __future__ import annotations

import torch

from . import validation
from .model import GPT, eval_mode


def next_token_probabilities(model: GPT, ids: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """softmax(z_T / temperature) (V,) for the token after the 1-D ids, seeing at most T_max of them.

    Every id is checked, also those before the last T_max. The logits are shifted so their
    maximum is 0 before dividing, in double precision: any temperature > 0, however small,
    gives finite probabilities (the limit is greedy decoding, ties shared).
    """
    ids = validation.token_ids(ids, model.config.V, dims=(1,), name="ids")
    temperature = validation.real("temperature", temperature, above=0)
    validation.finite_weights(model)
    return _next_token_probabilities(model, ids, temperature)


def _next_token_probabilities(model: GPT, ids: torch.Tensor, temperature: float) -> torch.Tensor:
    """next_token_probabilities for ids and temperature already checked (sample's loop: its ids grow by
    one checked id a step, so checking them all again would cost O(n^2) over a sample)."""
    with torch.no_grad():
        z = model(ids[-model.config.T_max :])[-1].double()  # (V,), logits of the next token
    if not torch.isfinite(z).all():
        raise ValueError("the model's logits are not finite (NaN or inf weights?), so there is nothing to sample")
    return torch.softmax((z - z.max()) / temperature, dim=-1)  # (V,)


def sample(model: GPT, prompt: torch.Tensor, new_tokens: int, temperature: float = 1.0,
           generator: torch.Generator | None = None) -> torch.Tensor:
    """The 1-D prompt ids followed by new_tokens sampled ids (prompt length + new_tokens,).

    The prompt may be longer than T_max (the model sees its last T_max ids). Pass a seeded
    torch.Generator for a reproducible sample. Every argument is checked before the first
    step, also when new_tokens is 0 (a NaN or inf weight is refused and named), and the model's
    train/eval mode is restored even when a call fails.
    """
    prompt = validation.token_ids(prompt, model.config.V, dims=(1,), name="prompt")
    new_tokens = validation.integer("new_tokens", new_tokens, at_least=0)
    temperature = validation.real("temperature", temperature, above=0)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    validation.finite_weights(model)  # once a sample: the fused kernel can give finite logits for a NaN weight
    ids = prompt.clone()
    with eval_mode(model):
        for _ in range(new_tokens):
            probabilities = _next_token_probabilities(model, ids, temperature)
            choice = torch.multinomial(probabilities, 1, generator=generator)  # (1,)
            ids = torch.cat([ids, choice])
    return ids
