"""GPTs and their parts as learners write them, in plain torch (no gptlib), for the exercise checkers' tests.

ScratchGPT is written from scratch in nn.Module style (nanoGPT-, minGPT- or Karpathy-like, by its
switches). Switches also build the typical broken models: a mask off by one, one unmasked head, biases
on the query/key/value projection, no positional embedding, positions read from the end of P,
positions mixed by a mean or a LayerNorm over the T axis, large initial weights, examples that mix
across the batch; and nanoGPT's bias=False (no bias in any Linear or LayerNorm). EinsumGPT is
TransformerLens-like: raw nn.Parameters in per-head tensors, einsum, its own LayerNorm.

Then GPTs as learners copy them from well-known code, for the own-model checker's tests: Karpathy's
lecture gpt.py (a Head module per head, a bias on W_U), Hugging Face's GPT-2 (Conv1D: raw (d_in,
d_out) Parameters with biases, tied wte), nanoGPT (its own LayerNorm class, fused c_attn, torch's
causal kernel, tied, bias=True or False), and two built from torch's own layers
(nn.MultiheadAttention, nn.TransformerEncoder). Plain torch, no gptlib; each takes (V, T_max, d, H, L).

Below them, the build track's components (notebook 09) in layouts its reference solutions do not use,
each with a switch that plants one typical mistake: one head's Q, K, V in one nn.Linear(d, 3 d_head)
(nanoGPT's layout for one head) or in one stacked (3, d_head, d) Parameter; multi-head attention built
from such nn.Linear heads, or with one (3, H, d_head, d) Parameter applied by einsum; a block keeping
its two LayerNorms in an nn.ModuleList; a GPT storing E and P transposed, (d, V) and (d, T_max),
embedding by one_hot(ids) @ E.T."""

import math

import torch
import torch.nn.functional as F
from torch import nn


def causal_attention(q, k, v, *, scaled=True, masked=True, hidden=None, fill=float("-inf")):
    """softmax(q k^T / sqrt(d_head) + M) v, (..., T, d_head) each, M = fill where `hidden` (by default s > t).

    The attention of ScratchGPT and of the build track's components below (the well-known codes keep
    their own). scaled=False or masked=False plant a mistake; so do a `hidden` mask (broadcastable to
    (..., T, T)) other than s > t, and a finite fill.
    """
    T, d_head = q.shape[-2:]
    S = q @ k.transpose(-2, -1) / (math.sqrt(d_head) if scaled else 1.0)  # (..., T, T)
    if masked:
        S = S.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1) if hidden is None else hidden, fill)
    return S.softmax(-1) @ v


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
            hidden = torch.ones(T, T, dtype=torch.bool).triu(self.mask_diagonal).expand(self.H, T, T).clone()
            hidden[list(self.unmasked_heads)] = False
            out = causal_attention(q, k, v, hidden=hidden, fill=self.fill)  # (B, H, T, d_head)
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


class KarpathyHead(nn.Module):
    def __init__(self, d, head_size, block_size):
        super().__init__()
        self.key, self.query, self.value = (nn.Linear(d, head_size, bias=False) for _ in range(3))
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))
        self.dropout = nn.Dropout(0.2)

    def forward(self, x):  # (B, T, d) -> (B, T, head_size)
        T = x.shape[1]
        wei = self.query(x) @ self.key(x).transpose(-2, -1) * self.key.out_features**-0.5  # (B, T, T)
        wei = self.dropout(wei.masked_fill(self.tril[:T, :T] == 0, float("-inf")).softmax(dim=-1))
        return wei @ self.value(x)


class KarpathyBlock(nn.Module):
    def __init__(self, d, H, block_size):
        super().__init__()
        self.heads = nn.ModuleList(KarpathyHead(d, d // H, block_size) for _ in range(H))
        self.proj = nn.Linear(d, d)
        self.ffwd = nn.Sequential(nn.Linear(d, 4 * d), nn.ReLU(), nn.Linear(4 * d, d), nn.Dropout(0.2))
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.proj(torch.cat([head(h) for head in self.heads], dim=-1))
        return x + self.ffwd(self.ln2(x))


class KarpathyGPT(nn.Module):
    def __init__(self, V, T_max, d, H, L):
        super().__init__()
        self.token_embedding_table, self.position_embedding_table = nn.Embedding(V, d), nn.Embedding(T_max, d)
        self.blocks = nn.Sequential(*(KarpathyBlock(d, H, T_max) for _ in range(L)))
        self.ln_f, self.lm_head = nn.LayerNorm(d), nn.Linear(d, V)  # nn.Linear's default: a bias on W_U
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)

    def forward(self, idx, targets=None):  # (B, T) -> (logits (B, T, V), loss)
        x = self.token_embedding_table(idx) + self.position_embedding_table(torch.arange(idx.shape[1]))
        logits = self.lm_head(self.ln_f(self.blocks(x)))
        loss = None if targets is None else F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        return logits, loss


class Conv1D(nn.Module):
    """Hugging Face's GPT-2 layer: x W + b with W stored (d_in, d_out), raw Parameters."""

    def __init__(self, d_out, d_in):
        super().__init__()
        self.weight, self.bias = nn.Parameter(0.02 * torch.randn(d_in, d_out)), nn.Parameter(torch.zeros(d_out))

    def forward(self, x):
        return torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight).reshape(*x.shape[:-1], -1)


class HFBlock(nn.Module):
    def __init__(self, d, H, T_max):
        super().__init__()
        self.H, self.ln_1, self.ln_2 = H, nn.LayerNorm(d), nn.LayerNorm(d)
        self.c_attn, self.c_proj = Conv1D(3 * d, d), Conv1D(d, d)
        self.c_fc, self.mlp_proj = Conv1D(4 * d, d), Conv1D(d, 4 * d)
        self.register_buffer("bias", torch.ones(T_max, T_max, dtype=torch.bool).tril(), persistent=False)

    def forward(self, x):  # (B, T, d)
        B, T, d = x.shape
        q, k, v = (t.view(B, T, self.H, d // self.H).transpose(1, 2) for t in self.c_attn(self.ln_1(x)).split(d, dim=2))
        w = q @ k.transpose(-1, -2) / math.sqrt(d // self.H)  # (B, H, T, T)
        w = torch.where(self.bias[:T, :T], w, torch.finfo(w.dtype).min)  # GPT-2's mask: the dtype's minimum
        x = x + self.c_proj((w.softmax(-1) @ v).transpose(1, 2).reshape(B, T, d))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class HFGPT2(nn.Module):
    def __init__(self, V, T_max, d, H, L):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, d), nn.Embedding(T_max, d)
        self.h = nn.ModuleList(HFBlock(d, H, T_max) for _ in range(L))
        self.ln_f, self.lm_head = nn.LayerNorm(d), nn.Linear(d, V, bias=False)
        for embedding in (self.wte, self.wpe):
            nn.init.normal_(embedding.weight, std=0.02)
        self.lm_head.weight = self.wte.weight  # tied

    def forward(self, input_ids):  # (B, T) -> a tuple whose first item is the logits (B, T, V)
        x = self.wte(input_ids) + self.wpe(torch.arange(input_ids.shape[1]))
        for block in self.h:
            x = block(x)
        return (self.lm_head(self.ln_f(x)),)


class NanoLayerNorm(nn.Module):
    def __init__(self, d, bias):
        super().__init__()
        self.weight, self.bias = nn.Parameter(torch.ones(d)), (nn.Parameter(torch.zeros(d)) if bias else None)

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class NanoBlock(nn.Module):
    def __init__(self, d, H, bias):
        super().__init__()
        self.H, self.ln_1, self.ln_2 = H, NanoLayerNorm(d, bias), NanoLayerNorm(d, bias)
        self.c_attn, self.c_proj = nn.Linear(d, 3 * d, bias=bias), nn.Linear(d, d, bias=bias)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d, bias=bias), nn.GELU(), nn.Linear(4 * d, d, bias=bias))

    def forward(self, x):  # (B, T, d)
        B, T, d = x.shape
        q, k, v = (t.view(B, T, self.H, d // self.H).transpose(1, 2) for t in self.c_attn(self.ln_1(x)).split(d, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, d_head)
        x = x + self.c_proj(y.transpose(1, 2).reshape(B, T, d))
        return x + self.mlp(self.ln_2(x))


class LearnerNanoGPT(nn.Module):
    def __init__(self, V, T_max, d, H, L, bias=True):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(V, d), wpe=nn.Embedding(T_max, d), h=nn.ModuleList(NanoBlock(d, H, bias) for _ in range(L)),
            ln_f=NanoLayerNorm(d, bias),
        ))
        self.lm_head = nn.Linear(d, V, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # tied, nanoGPT's way round
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, idx, targets=None):
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(idx.shape[1]))
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x)), None


class TorchMHAGPT(nn.Module):
    """nn.MultiheadAttention (in_proj_weight (3d, d) a raw Parameter) with a float causal mask, P a raw Parameter."""

    def __init__(self, V, T_max, d, H, L):
        super().__init__()
        self.emb, self.pos = nn.Embedding(V, d), nn.Parameter(torch.randn(T_max, d))
        self.attn = nn.ModuleList(nn.MultiheadAttention(d, H, batch_first=True, bias=False) for _ in range(L))
        for attention in self.attn:
            attention.out_proj.bias = nn.Parameter(torch.zeros(d))  # b_O only, as in Theorem 5.2
        self.norms = nn.ModuleList(nn.LayerNorm(d) for _ in range(2 * L + 1))
        self.mlps = nn.ModuleList(nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d)) for _ in range(L))
        self.out = nn.Linear(d, V, bias=False)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, idx):
        T = idx.shape[1]
        x, mask = self.emb(idx) + self.pos[:T], nn.Transformer.generate_square_subsequent_mask(T)
        for l, (attention, mlp) in enumerate(zip(self.attn, self.mlps)):
            h = self.norms[2 * l](x)
            x = x + attention(h, h, h, attn_mask=mask, need_weights=False)[0]
            x = x + mlp(self.norms[2 * l + 1](x))
        return self.out(self.norms[-1](x))


class EncoderGPT(nn.Module):
    """nn.TransformerEncoder with norm_first=True and a causal mask: biases on W_Q, W_K, W_V included."""

    def __init__(self, V, T_max, d, H, L):
        super().__init__()
        self.emb, self.pos = nn.Embedding(V, d), nn.Embedding(T_max, d)
        layer = nn.TransformerEncoderLayer(d, H, 4 * d, dropout=0.1, activation="gelu", batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, L, enable_nested_tensor=False)
        self.ln_f, self.head = nn.LayerNorm(d), nn.Linear(d, V, bias=False)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.emb(idx) + self.pos(torch.arange(T))
        mask = nn.Transformer.generate_square_subsequent_mask(T)
        return self.head(self.ln_f(self.encoder(x, mask=mask, is_causal=True)))


# ---- the build track's components in other layouts -------------------------------------------


class FusedLinearHead(nn.Module):
    """One head, Q | K | V from one nn.Linear(d, 3 d_head), split as nanoGPT splits its c_attn."""

    def __init__(self, d, d_head, *, bias=False, scaled=True):
        super().__init__()
        self.qkv, self.scaled = nn.Linear(d, 3 * d_head, bias=bias), scaled

    def forward(self, X):  # (B, T, d) -> (B, T, d_head)
        q, k, v = self.qkv(X).chunk(3, dim=-1)
        return causal_attention(q, k, v, scaled=self.scaled)


class StackedHead(nn.Module):
    """One head, W_Q, W_K, W_V stacked in one Parameter (3, d_head, d), each acting as nn.Linear's weight."""

    def __init__(self, d, d_head, *, masked=True):
        super().__init__()
        self.W, self.masked = nn.Parameter(torch.randn(3, d_head, d) / math.sqrt(d)), masked

    def forward(self, X):  # (B, T, d) -> (B, T, d_head)
        q, k, v = torch.einsum("btd,ned->nbte", X, self.W)
        return causal_attention(q, k, v, masked=self.masked)


class FusedHeadsAttention(nn.Module):
    """Multi-head attention built from step 2's heads, each a FusedLinearHead, joined and sent through
    nn.Linear(d, d) (W_O with its bias b_O); scaled=False plants the mistake in every head."""

    def __init__(self, d, H, *, scaled=True):
        super().__init__()
        self.heads = nn.ModuleList(FusedLinearHead(d, d // H, scaled=scaled) for _ in range(H))
        self.out = nn.Linear(d, d)

    def forward(self, X):  # (B, T, d) -> (B, T, d)
        return self.out(torch.cat([head(X) for head in self.heads], dim=-1))


class StackedAttention(nn.Module):
    """Multi-head attention, W_Q, W_K, W_V of every head in one Parameter (3, H, d_head, d), applied by einsum;
    W_O (d, d) acting on the right, b_O (d,). interleaved=True joins the heads feature by feature (a mistake)."""

    def __init__(self, d, H, *, interleaved=False):
        super().__init__()
        self.W_qkv = nn.Parameter(torch.randn(3, H, d // H, d) / math.sqrt(d))
        self.W_O, self.b_O = nn.Parameter(torch.randn(d, d) / math.sqrt(d)), nn.Parameter(torch.zeros(d))
        self.interleaved = interleaved

    def forward(self, X):  # (B, T, d) -> (B, T, d)
        q, k, v = torch.einsum("btd,nhed->nbhte", X, self.W_qkv)  # each (B, H, T, d_head)
        C = causal_attention(q, k, v)  # (B, H, T, d_head)
        joined = C.permute(0, 2, 3, 1) if self.interleaved else C.transpose(1, 2)  # (B, T, ., .)
        return joined.flatten(2) @ self.W_O + self.b_O


class ModuleListBlock(nn.Module):
    """The pre-norm block with LN_1 and LN_2 kept in one nn.ModuleList; post_norm=True plants Aside 3.5's block."""

    def __init__(self, d, H, d_ff, *, post_norm=False):
        super().__init__()
        self.norms = nn.ModuleList(nn.LayerNorm(d) for _ in range(2))
        self.attn = StackedAttention(d, H)
        self.mlp = nn.Sequential(nn.Linear(d, d_ff), nn.GELU(), nn.Linear(d_ff, d))
        self.post_norm = post_norm

    def forward(self, X):  # (B, T, d)
        ln_1, ln_2 = self.norms
        if self.post_norm:
            Y = ln_1(X + self.attn(X))
            return ln_2(Y + self.mlp(Y))
        Y = X + self.attn(ln_1(X))
        return Y + self.mlp(ln_2(Y))


class TransposedGPT(nn.Module):
    """Section 5 with E stored as (d, V) and P as (d, T_max), tokens embedded by one_hot(ids) @ E.T;
    W_U (d, V), or E itself when tied (W_U = E^T of the lecture's (V, d) E). positions=False leaves P out."""

    def __init__(self, V, T_max, d, H, L, d_ff, *, tied=False, positions=True):
        super().__init__()
        self.E, self.P = nn.Parameter(torch.randn(d, V)), nn.Parameter(torch.randn(d, T_max))
        self.blocks = nn.ModuleList(ModuleListBlock(d, H, d_ff) for _ in range(L))
        self.ln_f = nn.LayerNorm(d)
        self.W_U = None if tied else nn.Parameter(torch.randn(d, V) / math.sqrt(d))
        self.positions = positions

    def forward(self, idx):  # (B, T) -> (B, T, V)
        X = F.one_hot(idx, self.E.shape[1]).to(self.E.dtype) @ self.E.T  # (B, T, d)
        if self.positions:
            X = X + self.P.T[: idx.shape[1]]
        for block in self.blocks:
            X = block(X)
        return self.ln_f(X) @ (self.E if self.W_U is None else self.W_U)


def init_transposed(model, residual_factor=None):
    """Project aside 5.2 for TransposedGPT: matrices ~ N(0, 0.02^2), W_O and W_2 ~ N(0, (0.02 residual_factor)^2)
    with residual_factor 1/sqrt(2L) unless given (a mistake), biases 0, gains 1."""
    factor = 1 / math.sqrt(2 * len(model.blocks)) if residual_factor is None else residual_factor
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.02 * (factor if name.endswith(("W_O", "mlp.2.weight")) else 1.0))
            else:
                p.fill_(1.0 if name.endswith("weight") else 0.0)  # the LayerNorms' gains; every bias
    return model
