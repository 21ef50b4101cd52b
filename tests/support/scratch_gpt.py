"""A GPT written from scratch with plain torch.nn (no gptlib), for the exercise checkers' tests.

Switches build the typical broken models: a mask off by one, one unmasked head, biases on the
query/key/value projection, no positional embedding, large initial weights, examples that mix
across the batch.
"""

import math

import torch
from torch import nn


class ScratchAttention(nn.Module):
    def __init__(self, d, H, mask_diagonal, unmasked_heads, qkv_bias, fill):
        super().__init__()
        self.H, self.mask_diagonal, self.unmasked_heads, self.fill = H, mask_diagonal, unmasked_heads, fill
        self.qkv = nn.Linear(d, 3 * d, bias=qkv_bias)
        self.proj = nn.Linear(d, d)

    def forward(self, x):  # (B, T, d)
        B, T, d = x.shape
        q, k, v = (t.reshape(B, T, self.H, d // self.H).transpose(1, 2) for t in self.qkv(x).split(d, dim=-1))
        S = q @ k.transpose(-2, -1) / math.sqrt(d // self.H)  # (B, H, T, T)
        hidden = torch.ones(T, T, dtype=torch.bool).triu(self.mask_diagonal).expand(self.H, T, T).clone()
        hidden[list(self.unmasked_heads)] = False
        A = S.masked_fill(hidden, self.fill).softmax(dim=-1)
        return self.proj((A @ v).transpose(1, 2).reshape(B, T, d))


class ScratchBlock(nn.Module):
    def __init__(self, d, H, **attention):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = ScratchAttention(d, H, **attention)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class ScratchGPT(nn.Module):
    def __init__(
        self, V=17, T_max=16, d=32, H=4, L=2, *, mask_diagonal=1, leak=None, qkv_bias=False, positions=True,
        tied=False, init_std=0.02, mix_batch=False, fill=float("-inf"),
    ):
        super().__init__()
        self.mix_batch = mix_batch
        self.tok = nn.Embedding(V, d)
        self.pos = nn.Embedding(T_max, d) if positions else None
        self.blocks = nn.ModuleList(
            ScratchBlock(d, H, mask_diagonal=mask_diagonal, unmasked_heads=leak[1:] if leak and leak[0] == l else (),
                         qkv_bias=qkv_bias, fill=fill)
            for l in range(L)
        )  # leak = (layer, head, ...): those heads of that layer are unmasked
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, V, bias=False)
        if tied:
            self.lm_head.weight = self.tok.weight
        for name, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=init_std)

    def forward(self, idx):  # (B, T) -> (B, T, V)
        x = self.tok(idx)
        if self.pos is not None:
            x = x + self.pos(torch.arange(idx.shape[1]))
        if self.mix_batch:
            x = x + x.mean(dim=0, keepdim=True)  # BatchNorm-like: every sequence sees the others
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))
