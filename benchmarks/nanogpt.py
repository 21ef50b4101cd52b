"""A fused nanoGPT-style GPT: the speed reference gptlib's training step is held against.

    ref = nanogpt_from(model)        # same sizes, same biases, a copy of gptlib's weights
    logits, loss = ref(idx, targets)

Written the way Karpathy's nanoGPT writes it: one Linear for Q, K, V together (c_attn),
`F.scaled_dot_product_attention`, nn.LayerNorm, nn.Linear everywhere else. The bias
conventions are gptlib's (Theorem 5.2's count): no bias on Q, K, V or the unembedding, a
bias on W_O and both MLP layers, exact GELU, no dropout, W_U tied to E only if the config
ties it. Only pre-norm, causal, full blocks (gptlib.export.check_mappable).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from gptlib import GPT, GPTConfig
from gptlib.export import check_mappable, stacked_heads


class NanoGPTBlock(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        d, self.H = config.d, config.H
        self.ln_1 = nn.LayerNorm(d, eps=config.ln_eps)
        self.c_attn = nn.Linear(d, 3 * d, bias=False)  # [W_Q | W_K | W_V]^T, (3d, d)
        self.c_proj = nn.Linear(d, d)  # W_O^T, b_O
        self.ln_2 = nn.LayerNorm(d, eps=config.ln_eps)
        self.c_fc = nn.Linear(d, config.d_ff)  # W_1, b_1
        self.mlp_proj = nn.Linear(config.d_ff, d)  # W_2, b_2

    def attend(self, x: torch.Tensor, keep: list | None) -> torch.Tensor:  # (B, T, d) -> (B, T, d)
        B, T, d = x.shape
        q, k, v = (t.view(B, T, self.H, d // self.H).transpose(1, 2) for t in self.c_attn(x).split(d, dim=2))
        if keep is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, d_head)
        else:  # nanoGPT's manual path, keeping the attention matrices
            scores = q @ k.transpose(-2, -1) * (d // self.H) ** -0.5  # (B, H, T, T)
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
            att = scores.masked_fill(mask, float("-inf")).softmax(dim=-1)
            keep.append(att)
            y = att @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, d))

    def forward(self, x: torch.Tensor, keep: list | None = None) -> torch.Tensor:
        x = x + self.attend(self.ln_1(x), keep)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))


class NanoGPT(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        check_mappable(config)
        self.wte = nn.Embedding(config.V, config.d)
        self.wpe = nn.Embedding(config.T_max, config.d)
        self.h = nn.ModuleList(NanoGPTBlock(config) for _ in range(config.L))
        self.ln_f = nn.LayerNorm(config.d, eps=config.ln_eps)
        self.lm_head = nn.Linear(config.d, config.V, bias=False)
        if config.tie_weights:
            self.lm_head.weight = self.wte.weight

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None, keep: list | None = None):
        """idx (B, T) -> logits (B, T, V), and the mean cross-entropy when targets (B, T) are given."""
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.h:
            x = block(x, keep)
        logits = self.lm_head(self.ln_f(x))
        if targets is None:
            return logits
        return logits, F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def nanogpt_from(model: GPT) -> NanoGPT:
    """A NanoGPT with `model`'s config and a copy of its weights (nn.Linear stores W as (out, in))."""
    config = model.config
    ref = NanoGPT(config)
    with torch.no_grad():
        ref.wte.weight.copy_(model.E)
        ref.wpe.weight.copy_(model.P)
        for block, ref_block in zip(model.blocks, ref.h):
            attn = block.attn
            ref_block.ln_1.weight.copy_(block.ln_1.gamma)
            ref_block.ln_1.bias.copy_(block.ln_1.beta)
            ref_block.c_attn.weight.copy_(torch.cat([stacked_heads(W) for W in (attn.W_Q, attn.W_K, attn.W_V)], 1).T)
            ref_block.c_proj.weight.copy_(attn.W_O.T)
            ref_block.c_proj.bias.copy_(attn.b_O)
            ref_block.ln_2.weight.copy_(block.ln_2.gamma)
            ref_block.ln_2.bias.copy_(block.ln_2.beta)
            ref_block.c_fc.weight.copy_(block.mlp.W_1)
            ref_block.c_fc.bias.copy_(block.mlp.b_1)
            ref_block.mlp_proj.weight.copy_(block.mlp.W_2)
            ref_block.mlp_proj.bias.copy_(block.mlp.b_2)
        ref.ln_f.weight.copy_(model.ln_f.gamma)
        ref.ln_f.bias.copy_(model.ln_f.beta)
        if not config.tie_weights:
            ref.lm_head.weight.copy_(model.W_U.T)
    return ref.eval()
