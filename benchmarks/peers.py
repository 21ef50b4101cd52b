"""The models the benchmarks compare gptlib with, and how they are compared.

The peers themselves are gptlib's public exports (gptlib.export: to_huggingface for transformers'
GPT2LMHeadModel, to_transformer_lens for TransformerLens' HookedTransformer, each proven equal by
its logits); here are a model whose every parameter shows in its logits, and the measured gap.
"""

from __future__ import annotations

import torch

from gptlib import GPT, GPTConfig


@torch.no_grad()
def scrambled_model(config: GPTConfig, init_std: float = 0.1, scale: float = 0.1) -> GPT:
    """A GPT in eval mode whose every parameter matters to its logits, for comparisons.

    The course init (std 0.02, Project aside 5.2) leaves attention nearly uniform, so swapping
    W_Q and W_K would barely change a logit; std 0.1 makes the heads sharp. Every gamma, beta
    and bias also gets N(0, scale^2) noise: at init they are 1 and 0, values that a dropped
    parameter would reproduce by accident.
    """
    model = GPT(config.replace(init_std=init_std)).eval()
    for name, p in model.named_parameters():
        if name.endswith(("gamma", "beta", "b_O", "b_1", "b_2")):
            p.add_(scale * torch.randn_like(p))
    return model


@torch.no_grad()
def max_logit_difference(model: GPT, peer, idx: torch.Tensor) -> float:
    """max |Z_gptlib - Z_peer| over a batch idx (B, T); peer is a GPT-2 or a HookedTransformer."""
    Z = model(idx)  # (B, T, V)
    out = peer(idx)
    Z_peer = out.logits if hasattr(out, "logits") else out  # GPT-2 returns an output object
    return (Z - Z_peer).abs().max().item()
