"""GPTs written from scratch with plain torch (no gptlib), in the styles learners write, for the
exercise checkers' tests.

ScratchGPT: nn.Module style (nanoGPT-, minGPT- or Karpathy-like, by its switches). Switches also
build the typical broken models: a mask off by one, one unmasked head, biases on the query/key/value
projection, no positional embedding, positions read from the end of P, positions mixed by a mean or a
LayerNorm over the T axis, large initial weights, examples that mix across the batch; and
nanoGPT's bias=False (no bias in any Linear or LayerNorm).
EinsumGPT: TransformerLens-like, raw nn.Parameters in per-head tensors, einsum, its own LayerNorm.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn


class ScratchAttention(nn.Module):
    def __init__(self, d, H, mask_diagonal, unmasked_heads, qkv_bias, fill, fused=True, sdpa=False, bias=True):
        super().__init__()
        self.H, self.mask_diagonal, self.unmasked_heads, self.fill, self.sdpa = H, mask_diagonal, unmasked_heads, fill, sdpa
        if fused:  # nanoGPT / minGPT: one (3d x d) projection
            self.qkv = nn.Linear(d, 3 * d, bias=qkv_bias)
        else:  # one projection each, Karpathy-like names
            self.query, self.key, self.value = (nn.Linear(d, d, bias=qkv_bias) for _ in range(3))
        self.proj = nn.Linear(d, d, bias=bias)

    def forward(self, x):  # (B, T, d)
        B, T, d = x.shape
        qkv = self.qkv(x).split(d, dim=-1) if hasattr(self, "qkv") else (self.query(x), self.key(x), self.value(x))
        q, k, v = (t.reshape(B, T, self.H, d // self.H).transpose(1, 2) for t in qkv)  # (B, H, T, d_head)
        if self.sdpa:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            S = q @ k.transpose(-2, -1) / math.sqrt(d // self.H)  # (B, H, T, T)
            hidden = torch.ones(T, T, dtype=torch.bool).triu(self.mask_diagonal).expand(self.H, T, T).clone()
            hidden[list(self.unmasked_heads)] = False
            out = S.masked_fill(hidden, self.fill).softmax(dim=-1) @ v
        return self.proj(out.transpose(1, 2).reshape(B, T, d))


class ScratchBlock(nn.Module):
    def __init__(self, d, H, d_ff=None, bias=True, **attention):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(d, bias=bias), nn.LayerNorm(d, bias=bias)
        self.attn = ScratchAttention(d, H, bias=bias, **attention)
        self.mlp = nn.Sequential(nn.Linear(d, d_ff or 4 * d, bias=bias), nn.GELU(), nn.Linear(d_ff or 4 * d, d, bias=bias))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class ScratchGPT(nn.Module):
    def __init__(
        self, V=17, T_max=16, d=32, H=4, L=2, *, d_ff=None, mask_diagonal=1, leak=None, qkv_bias=False, positions=True,
        tied=False, init_std=0.02, mix_batch=False, mix_positions=None, fill=float("-inf"), unembedding="lm_head",
        fused=True, sdpa=False, linear_bias=True,
    ):
        super().__init__()
        self.mix_batch, self.mix_positions, self.unembedding = mix_batch, mix_positions, unembedding
        self.tok = nn.Embedding(V, d)
        self.pos = nn.Embedding(T_max, d) if positions else None
        self.positions_from_end = positions == "end"  # P[-T:]: the last T rows of P, wrongly
        self.blocks = nn.ModuleList(
            ScratchBlock(d, H, d_ff, linear_bias, mask_diagonal=mask_diagonal,
                         unmasked_heads=leak[1:] if leak and leak[0] == l else (), qkv_bias=qkv_bias, fill=fill,
                         fused=fused, sdpa=sdpa)
            for l in range(L)
        )  # leak = (layer, head, ...): those heads of that layer are unmasked
        self.ln_f = nn.LayerNorm(d, bias=linear_bias)
        setattr(self, unembedding, nn.Linear(d, V, bias=False))  # lm_head (nanoGPT), head (minGPT), U, ...
        if tied:
            getattr(self, unembedding).weight = self.tok.weight
        for name, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=init_std)

    def forward(self, idx):  # (B, T) -> (B, T, V)
        T = idx.shape[1]
        x = self.tok(idx)
        if self.pos is not None:
            x = x + (self.pos.weight[-T:] if self.positions_from_end else self.pos(torch.arange(T)))
        if self.mix_batch:
            x = x + x.mean(dim=0, keepdim=True)  # BatchNorm-like: every sequence sees the others
        if self.mix_positions == "mean":
            x = x + x.mean(dim=1, keepdim=True)  # every position sees the mean of all, later ones included
        elif self.mix_positions == "layernorm":
            x = F.layer_norm(x.transpose(1, 2), (T,)).transpose(1, 2)  # normalized over the T axis
        for block in self.blocks:
            x = block(x)
        return getattr(self, self.unembedding)(self.ln_f(x))


class EinsumGPT(nn.Module):
    """TransformerLens-like: per-head tensors W_Q, W_K, W_V (L, H, d, d_head), W_O (L, H, d_head, d),
    raw Parameters everywhere, einsum, a LayerNorm written out; W_U (d, V), or E^T when tied."""

    def __init__(self, V=17, T_max=16, d=32, H=4, L=2, *, d_ff=None, tied=False, qkv_bias=False, positions=True,
                 output_bias=True, dtype=torch.float32, seed=0):
        super().__init__()
        d_ff, d_head = d_ff or 4 * d, d // H
        generator = torch.Generator().manual_seed(seed)

        def normal(*shape):
            return nn.Parameter(0.02 * torch.randn(*shape, generator=generator, dtype=dtype))

        def const(value, *shape):
            return nn.Parameter(torch.full(shape, value, dtype=dtype))

        self.H, self.tied = H, tied
        self.E, self.P = normal(V, d), (normal(T_max, d) if positions else None)
        self.W_Q, self.W_K, self.W_V = normal(L, H, d, d_head), normal(L, H, d, d_head), normal(L, H, d, d_head)
        self.b_QKV = const(0.0, L, 3, H, d_head) if qkv_bias else None
        self.W_O, self.b_O = normal(L, H, d_head, d), (const(0.0, L, d) if output_bias else None)
        self.W_in, self.b_in = normal(L, d, d_ff), const(0.0, L, d_ff)
        self.W_out, self.b_out = normal(L, d_ff, d), const(0.0, L, d)
        self.gains, self.shifts = const(1.0, 2 * L + 1, d), const(0.0, 2 * L + 1, d)  # LN_1, LN_2 per block, then LN_f
        self.W_U = None if tied else normal(d, V)

    def norm(self, x, i):  # (B, T, d): Definition 4.1 written out
        centred = x - x.mean(-1, keepdim=True)
        return centred / torch.sqrt(centred.pow(2).mean(-1, keepdim=True) + 1e-5) * self.gains[i] + self.shifts[i]

    def forward(self, idx):  # (B, T) -> (B, T, V)
        T = idx.shape[1]
        x = self.E[idx] + (self.P[:T] if self.P is not None else 0)  # (B, T, d)
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        for l in range(self.W_Q.shape[0]):
            h = self.norm(x, 2 * l)
            q, k, v = (torch.einsum("btd,hde->bhte", h, W[l]) for W in (self.W_Q, self.W_K, self.W_V))  # (B, H, T, d_head)
            if self.b_QKV is not None:
                q, k, v = (t + b[:, None, :] for t, b in zip((q, k, v), self.b_QKV[l]))
            S = torch.einsum("bhte,bhse->bhts", q, k) / math.sqrt(q.shape[-1])  # (B, H, T, T)
            A = S.masked_fill(~causal, float("-inf")).softmax(-1)
            x = x + torch.einsum("bhts,bhse,hed->btd", A, v, self.W_O[l]) + (self.b_O[l] if self.b_O is not None else 0)
            h = self.norm(x, 2 * l + 1)
            x = x + F.gelu(h @ self.W_in[l] + self.b_in[l]) @ self.W_out[l] + self.b_out[l]
        h = self.norm(x, -1)
        return h @ (self.E.T if self.tied else self.W_U)  # (B, T, V)
