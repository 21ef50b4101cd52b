"""Reference solutions of the build track (notebook 09): the course GPT written in plain torch, one
class per step, in the order the block needs them (LayerNorm first, though the lecture defines it in
Section 4). A learner sees one only by asking, `show_solution("mlp")`. Written the way a learner
would (explicit attention matrices, LayerNorm as a formula, no fused kernels); the tests run each
through its checker and train the whole model (benchmarks/build_track.py).
"""

from __future__ import annotations

import math

import torch
from torch import nn


class LayerNorm(nn.Module):
    """Definition 4.1: gamma * (u - mean(u)) / sqrt(var(u) + eps) + beta, over the last dimension."""

    def __init__(self, d: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.gamma = nn.Parameter(torch.ones(d))  # (d,)
        self.beta = nn.Parameter(torch.zeros(d))  # (d,)

    def forward(self, u: torch.Tensor) -> torch.Tensor:  # (..., d) -> (..., d)
        centred = u - u.mean(dim=-1, keepdim=True)
        variance = centred.pow(2).mean(dim=-1, keepdim=True)  # divides by d, not d - 1
        return self.gamma * centred / torch.sqrt(variance + self.eps) + self.beta


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(q k^T / sqrt(d_head) + M) v with M = -inf where s > t: (..., T, d_head) each -> (..., T, d_head)."""
    T, d_head = q.shape[-2:]
    S = q @ k.transpose(-2, -1) / math.sqrt(d_head)  # (..., T, T), S[t, s]
    future = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(diagonal=1)  # s > t
    A = S.masked_fill(future, float("-inf")).softmax(dim=-1)  # each row t sums to 1 over s
    return A @ v


class AttentionHead(nn.Module):
    """One head of Definition 1.1: A V with A = softmax(X W_Q (X W_K)^T / sqrt(d_head) + M), V = X W_V."""

    def __init__(self, d: int, d_head: int):
        super().__init__()
        self.W_Q = nn.Parameter(torch.randn(d, d_head) / math.sqrt(d))  # (d, d_head)
        self.W_K = nn.Parameter(torch.randn(d, d_head) / math.sqrt(d))
        self.W_V = nn.Parameter(torch.randn(d, d_head) / math.sqrt(d))

    def forward(self, X: torch.Tensor) -> torch.Tensor:  # (B, T, d) -> (B, T, d_head)
        return causal_attention(X @ self.W_Q, X @ self.W_K, X @ self.W_V)


class MultiHeadAttention(nn.Module):
    """Definition 1.1: [head^1(X) | ... | head^H(X)] W_O + b_O."""

    def __init__(self, d: int, H: int):
        super().__init__()
        self.heads = nn.ModuleList(AttentionHead(d, d // H) for _ in range(H))
        self.W_O = nn.Parameter(torch.randn(d, d) / math.sqrt(d))  # (d, d): rows h*d_head.. belong to head h
        self.b_O = nn.Parameter(torch.zeros(d))

    def forward(self, X: torch.Tensor) -> torch.Tensor:  # (B, T, d) -> (B, T, d)
        C = torch.cat([head(X) for head in self.heads], dim=-1)  # (B, T, d), heads side by side in order
        return C @ self.W_O + self.b_O


class MLP(nn.Module):
    """Definition 2.1: W_2 GELU(W_1 u + b_1) + b_2 on every row, with the exact GELU t * Phi(t)."""

    def __init__(self, d: int, d_ff: int):
        super().__init__()
        self.W_1 = nn.Parameter(torch.randn(d, d_ff) / math.sqrt(d))  # acting on rows: X W_1, (d, d_ff)
        self.b_1 = nn.Parameter(torch.zeros(d_ff))
        self.W_2 = nn.Parameter(torch.randn(d_ff, d) / math.sqrt(d_ff))  # (d_ff, d)
        self.b_2 = nn.Parameter(torch.zeros(d))

    def forward(self, X: torch.Tensor) -> torch.Tensor:  # (B, T, d) -> (B, T, d)
        hidden = X @ self.W_1 + self.b_1  # (B, T, d_ff)
        gelu = hidden * 0.5 * (1 + torch.erf(hidden / math.sqrt(2)))  # t * Phi(t), exactly
        return gelu @ self.W_2 + self.b_2


class Block(nn.Module):
    """Definition 3.1, pre-norm: Y = X + MHA(LN_1(X)), X' = Y + MLP(LN_2(Y))."""

    def __init__(self, d: int, H: int, d_ff: int):
        super().__init__()
        self.ln_1, self.attn = LayerNorm(d), MultiHeadAttention(d, H)
        self.ln_2, self.mlp = LayerNorm(d), MLP(d, d_ff)

    def forward(self, X: torch.Tensor) -> torch.Tensor:  # (B, T, d) -> (B, T, d)
        Y = X + self.attn(self.ln_1(X))
        return Y + self.mlp(self.ln_2(Y))


class GPT(nn.Module):
    """Section 5: X^(0) = E[x] + P, L blocks, Z = LN_f(X^(L)) W_U."""

    def __init__(self, V: int, T_max: int, d: int, H: int, L: int, d_ff: int):
        super().__init__()
        self.E = nn.Parameter(torch.randn(V, d))  # (V, d)
        self.P = nn.Parameter(torch.randn(T_max, d))  # (T_max, d)
        self.blocks = nn.ModuleList(Block(d, H, d_ff) for _ in range(L))
        self.ln_f = LayerNorm(d)
        self.W_U = nn.Parameter(torch.randn(d, V))  # (d, V)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:  # (B, T) ids -> (B, T, V) logits
        X = self.E[idx] + self.P[: idx.shape[-1]]  # (B, T, d)
        for block in self.blocks:
            X = block(X)
        return self.ln_f(X) @ self.W_U


@torch.no_grad()
def init_weights(model: GPT, std: float = 0.02) -> GPT:
    """GPT-2's conventions, which the lecture does not state: every weight matrix, E and P from N(0, std^2),
    std = 0.02; gains 1, biases 0. Project aside 5.2's one rule on top: the output projection of each branch
    (W_O and W_2, which write into the residual stream) gets std / sqrt(2L)."""
    L = len(model.blocks)
    for block in model.blocks:
        for head in block.attn.heads:
            for W in (head.W_Q, head.W_K, head.W_V):
                W.normal_(0.0, std)
        block.attn.W_O.normal_(0.0, std / math.sqrt(2 * L))
        block.mlp.W_1.normal_(0.0, std)
        block.mlp.W_2.normal_(0.0, std / math.sqrt(2 * L))
        for bias in (block.attn.b_O, block.mlp.b_1, block.mlp.b_2):
            bias.zero_()
        for ln in (block.ln_1, block.ln_2):
            ln.gamma.fill_(1.0)
            ln.beta.zero_()
    for W in (model.E, model.P, model.W_U):
        W.normal_(0.0, std)
    model.ln_f.gamma.fill_(1.0)
    model.ln_f.beta.zero_()
    return model


# The reference of each build step (hints.show_solution prints their source).
SOLUTIONS = {
    "layer_norm": (LayerNorm,),
    "attention_head": (causal_attention, AttentionHead),
    "multi_head_attention": (MultiHeadAttention,),
    "mlp": (MLP,),
    "block": (Block,),
    "gpt": (GPT,),
    "init": (init_weights,),
}
