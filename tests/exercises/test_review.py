"""A reviewer's own learner answers for every checker, in styles the other exercise tests do not use:
correct ones must pass, wrong ones must fail (or error)
with a message containing the word given. The verdicts come from Lecture 5, not from the checkers."""

import math
from fractions import Fraction
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from gptlib import COURSE_CONFIG, exercises
from gptlib.checking import PASSED
from gptlib.exercises import build_track

pytestmark = pytest.mark.usefixtures("one_thread")
OK = None  # expected verdict: passed


# ---- a learner's GPT, written from scratch in several layouts ----------------------------------


class Attention(nn.Module):
    """Per-head nn.Linear modules in a ModuleList (Karpathy-like), or one qkv Parameter (3, d, d)."""

    def __init__(self, d, H, *, per_head=True, mask_offset=1, qkv_bias=False, mask="before softmax"):
        super().__init__()
        self.H, self.mask_offset, self.per_head, self.mask = H, mask_offset, per_head, mask
        if per_head:
            self.heads = nn.ModuleList(nn.ModuleList(nn.Linear(d, d // H, bias=qkv_bias) for _ in range(3))
                                       for _ in range(H))
        else:
            self.qkv = nn.Parameter(0.02 * torch.randn(3, d, d))
        self.out = nn.Linear(d, d)

    def forward(self, x):  # (B, T, d)
        B, T, d = x.shape
        if self.per_head:
            qkv = [torch.stack([lin(x) for lin in head], 0) for head in self.heads]  # H x (3, B, T, d_head)
            q, k, v = torch.stack(qkv, 2)  # (B, H, T, d_head) each
        else:
            q, k, v = (torch.einsum("btd,de->bte", x, W).view(B, T, self.H, d // self.H).transpose(1, 2) for W in self.qkv)
        S = q @ k.transpose(-1, -2) / math.sqrt(d // self.H)  # (B, H, T, T)
        future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(self.mask_offset)  # (T, T)
        if self.mask == "before softmax":
            A = S.masked_fill(future, float("-inf")).softmax(-1)
        elif self.mask == "-1e9":
            A = S.masked_fill(future, -1e9).softmax(-1)
        elif self.mask == "after softmax":  # weights of the future zeroed, not renormalized
            A = S.softmax(-1).masked_fill(future, 0.0)
        else:  # "inverted": hides the past, keeps the future
            A = S.masked_fill(future.T, float("-inf")).softmax(-1)
        return self.out((A @ v).transpose(1, 2).reshape(B, T, d))


class Block(nn.Module):
    def __init__(self, d, H, d_ff, *, post_norm=False, dropout=0.0, **attention):
        super().__init__()
        self.parts = nn.ModuleDict(dict(
            norm1=nn.LayerNorm(d), attention=Attention(d, H, **attention), norm2=nn.LayerNorm(d),
            ff=nn.Sequential(nn.Linear(d, d_ff), nn.GELU(), nn.Linear(d_ff, d), nn.Dropout(dropout)),
        ))
        self.post_norm = post_norm

    def forward(self, x):
        p = self.parts
        if self.post_norm:
            x = p["norm1"](x + p["attention"](x))
            return p["norm2"](x + p["ff"](x))
        x = x + p["attention"](p["norm1"](x))
        return x + p["ff"](p["norm2"](x))


class LearnerGPT(nn.Module):
    """A from-scratch GPT: blocks in an nn.ModuleDict, an HF-like config object (not gptlib's),
    forward(idx, targets=None) -> (logits, loss) as nanoGPT's, optional dropout, tying through
    F.linear on the embedding's weight."""

    def __init__(self, V=23, T_max=12, d=24, H=3, L=2, d_ff=None, *, tied=False, final_norm=True, shared_blocks=False,
                 dropout=0.0, returns="tuple", batch_first=True, **block):
        super().__init__()
        d_ff = d_ff or 4 * d
        self.config = SimpleNamespace(vocab_size=V, n_positions=T_max, n_embd=d, n_head=H, n_layer=L)
        self.wte, self.wpe = nn.Embedding(V, d), nn.Embedding(T_max, d)
        self.drop = nn.Dropout(dropout)
        one = Block(d, H, d_ff, dropout=dropout, **block)
        self.h = nn.ModuleDict({f"layer{i}": one if shared_blocks else Block(d, H, d_ff, dropout=dropout, **block)
                                for i in range(L)})
        self.ln_f = nn.LayerNorm(d) if final_norm else nn.Identity()
        self.U = None if tied else nn.Parameter(0.02 * torch.randn(V, d))
        self.returns = returns
        for p in self.parameters():
            if p.dim() >= 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, idx, targets=None):  # (B, T) -> (B, T, V)
        T = idx.shape[1]
        x = self.drop(self.wte(idx) + self.wpe(torch.arange(T, device=idx.device)))
        for block in self.h.values():
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte.weight if self.U is None else self.U)
        loss = None if targets is None else F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        if self.returns == "dict":
            return {"logits": logits, "loss": loss}
        if self.returns == "object":
            return SimpleNamespace(logits=logits, loss=loss)
        return logits, loss


SIZES = dict(V=23, T_max=12, d=24, L=2)


def large_init(module):  # every weight matrix N(0, 1): far from uniform predictions at initialization
    for p in module.parameters(recurse=False):
        if p.dim() >= 2:
            nn.init.normal_(p, std=1.0)


class AlwaysDropout(LearnerGPT):
    """F.dropout on the logits with its default training=True: random in eval mode too."""

    def forward(self, idx, targets=None):
        logits, loss = super().forward(idx, targets)
        return F.dropout(logits, 0.1), loss


class TorchMHABatchMixer(nn.Module):
    """nn.MultiheadAttention with its default batch_first=False fed (B, T, d), its mask sized as torch asks
    (by the first axis, which it reads as time): attends across the batch."""

    def __init__(self, V=23, T_max=12, d=24, H=3):
        super().__init__()
        self.E, self.P = nn.Embedding(V, d), nn.Embedding(T_max, d)
        self.attn, self.W_U = nn.MultiheadAttention(d, H), nn.Linear(d, V, bias=False)

    def forward(self, idx):
        B, T = idx.shape
        x = self.E(idx) + self.P(torch.arange(T))
        mask = torch.ones(B, B, dtype=torch.bool).triu(1)
        return self.W_U(x + self.attn(x, x, x, attn_mask=mask, need_weights=False)[0])


def conv_lookahead(V=23, d=16):
    """A causal-looking convolution padded on both sides: every Z_t sees x_(t+1)."""
    E, conv, U = nn.Embedding(V, d), nn.Conv1d(d, d, 3, padding=1), nn.Linear(d, V)
    return lambda idx: U(conv(E(idx).transpose(1, 2)).transpose(1, 2))


def prefix_mean_model(V=23, d=16, reverse=False):
    """Z_t from the running mean of the embeddings (causal), or of the suffix (reverse: sees the future)."""
    E, U = nn.Embedding(V, d), nn.Linear(d, V)

    def forward(idx):
        x = E(idx)  # (B, T, d)
        if reverse:
            x = x.flip(1)
        mean = x.cumsum(1) / torch.arange(1, x.shape[1] + 1)[:, None]
        return U(mean.flip(1) if reverse else mean)

    return forward


def seeded(make):
    def build_it():
        torch.manual_seed(0)
        return make()
    return build_it


# ---- the answers -------------------------------------------------------------------------------


def count_by_rows(c):  # the theorem written component by component, biases listed one by one
    attention = 3 * c.H * c.d * (c.d // c.H) + c.d * c.d + c.d
    mlp = c.d * c.d_ff + c.d_ff + c.d_ff * c.d + c.d
    norms = 2 * (c.d + c.d)
    return c.V * c.d + c.T_max * c.d + c.L * (attention + mlp + norms) + 2 * c.d + (0 if c.tie_weights else c.V * c.d)


def count_by_shapes(c):  # the learner lists every tensor's shape and multiplies out
    block = [(c.d, 3 * c.d), (c.d, c.d), (c.d,), (c.d, c.d_ff), (c.d_ff,), (c.d_ff, c.d), (c.d,)] + [(c.d,)] * 4
    shapes = [(c.V, c.d), (c.T_max, c.d)] + block * c.L + [(c.d,), (c.d,)] + ([] if c.tie_weights else [(c.d, c.V)])
    return sum(math.prod(shape) for shape in shapes)


def table_rows(c):
    return [c.V * c.d + c.T_max * c.d, c.L * (4 * c.d * c.d + c.d), c.L * (2 * c.d * c.d_ff + c.d_ff + c.d),
            4 * c.L * c.d, 2 * c.d + (0 if c.tie_weights else c.d * c.V)]


COURSE_ROWS = table_rows(COURSE_CONFIG)


def ones_projector(u):  # (I - 1 1^T / d) applied to each row, in numpy
    u = np.asarray(u)
    d = u.shape[-1]
    return u @ (np.eye(d) - np.ones((d, d)) / d)


def measured_decay(c):  # the learner measures the factors with their own LN(W x) and autograd, in float32
    torch.manual_seed(5)
    W, x, r = torch.randn(6, 5), torch.randn(9, 5), torch.randn(9, 6)

    def grad_norm(scale):
        Wc = (scale * W).requires_grad_()
        (F.layer_norm(x @ Wc.T, (6,)) * r).sum().backward()
        return Wc.grad.double().norm().item()

    g = grad_norm(c) / grad_norm(1.0)
    return g, g / c


def circuits_numpy(attn, h):
    W_Q, W_K, W_V, W_O = (t.detach().numpy() for t in (attn.W_Q[h], attn.W_K[h], attn.W_V[h], attn.W_O))
    d_head = W_Q.shape[1]
    return W_Q @ W_K.T, W_V @ W_O[h * d_head:(h + 1) * d_head]


def circuits_view(attn, h):  # W_O^h as a view of W_O's rows, products by multi_dot, float32
    d, d_head = attn.W_O.shape[0], attn.W_Q.shape[-1]
    W_O_h = attn.W_O.view(-1, d_head, d)[h].float()
    return torch.linalg.multi_dot([attn.W_Q[h].float(), attn.W_K[h].float().T]), attn.W_V[h].float() @ W_O_h


def circuits_o_columns(attn, h):  # W_O reshaped (d, H, d_head): head h's COLUMNS, the wrong slice
    d, d_head = attn.W_O.shape[0], attn.W_Q.shape[-1]
    return attn.W_Q[h] @ attn.W_K[h].T, attn.W_V[h] @ attn.W_O.reshape(d, -1, d_head)[:, h, :].T


def circuits_scaled_by_d(attn, h):
    d = attn.W_O.shape[0]
    qk, ov = circuits_numpy(attn, h)
    return qk / math.sqrt(d), ov


def circuits_swapped(attn, h):
    qk, ov = circuits_numpy(attn, h)
    return ov, qk


def measured_rank_bounds(d, H, T, svd=False):  # the learner measures ranks of random heads
    g = torch.Generator().manual_seed(d * 100 + H * 10 + T)
    W_Q, W_K, W_V = (torch.randn(d, d // H, generator=g, dtype=torch.float64) for _ in range(3))
    W_O, X = torch.randn(d // H, d, generator=g, dtype=torch.float64), torch.randn(T, d, generator=g, dtype=torch.float64)
    S = X @ W_Q @ W_K.T @ X.T / math.sqrt(d // H)
    if svd:
        def rank(M):
            s = torch.linalg.svdvals(M)
            return int((s > s[0] * 1e-10).sum())
    else:
        rank = torch.linalg.matrix_rank
    return torch.stack([torch.as_tensor(rank(M)) for M in (W_Q @ W_K.T, W_V @ W_O, S)])


def post_norm(block):
    def f(Z):  # (T, d) -> (T, d), the post-norm block on one sequence
        Y = block.ln_1(Z + block.attn(Z[None])[0])
        return block.ln_2(Y + block.mlp(Y))
    return f


def jacobian_functional(block, X):  # torch.autograd.functional.jacobian on the flattened input
    T, d = X.shape
    f = post_norm(block)
    return torch.autograd.functional.jacobian(lambda v: f(v.view(T, d)).reshape(-1), X.reshape(-1))


def jacobian_central_differences(block, X, h=1e-5):
    f, x = post_norm(block), X.reshape(-1)
    with torch.no_grad():
        columns = [(f((x + h * e).view_as(X)) - f((x - h * e).view_as(X))).reshape(-1) / (2 * h)
                   for e in torch.eye(x.numel(), dtype=X.dtype)]
    return torch.stack(columns, 1).numpy()  # (T d, T d): column j is d vec(X') / d x_j


def jacobian_vmap_jacrev(block, X):  # per-output-position jacrev through torch.func, layout (T, d, T, d)
    return torch.func.jacrev(post_norm(block))(X)


def jacobian_swapped_norms(block, X):  # LN_2 first, LN_1 last
    T, d = X.shape

    def f(Z):
        Y = block.ln_2(Z + block.attn(Z[None])[0])
        return block.ln_1(Y + block.mlp(Y))
    return torch.autograd.functional.jacobian(lambda v: f(v.view(T, d)).reshape(-1), X.reshape(-1))


def jacobian_mlp_on_input(block, X):  # X' = LN_2(Y + MLP(X)): the MLP reads the block's input
    T, d = X.shape

    def f(Z):
        Y = block.ln_1(Z + block.attn(Z[None])[0])
        return block.ln_2(Y + block.mlp(Z))
    return torch.autograd.functional.jacobian(lambda v: f(v.view(T, d)).reshape(-1), X.reshape(-1))


def flops_other_order(c, T):  # integer arithmetic grouped per product kind, backward as 2x forward added
    forward = 2 * c.d * c.V + c.L * (2 * 4 * c.d * c.d + 2 * 2 * c.d * c.d_ff + 2 * 2 * T * c.d)
    return forward + 2 * forward


def flops_fraction(c, T):  # exact Fractions, per sequence then divided by T
    per_sequence = Fraction(6) * (c.L * (4 * T * c.d ** 2 + 2 * T * c.d * c.d_ff + 2 * T * T * c.d) + T * c.d * c.V)
    return per_sequence / T


def flops_measured(c, T):  # the learner counts a model of their own with FlopCounterMode
    from torch.utils.flop_counter import FlopCounterMode
    with torch.device("meta"):  # no memory, no arithmetic: FlopCounterMode still sees every product
        model = LearnerGPT(V=c.V, T_max=max(T, c.T_max), d=c.d, H=c.H, L=c.L, d_ff=c.d_ff)
        idx = torch.zeros(1, T, dtype=torch.long)
    with FlopCounterMode(display=False) as counter:
        logits, _ = model(idx)
        logits.sum().backward()
    return counter.get_total_flops() / T


def flops_backward_once(c, T):  # backward costed as one more forward
    return 2 * flops_other_order(c, T) // 3


def flops_with_T_max(c, T):  # the attention term at the longest length
    return flops_other_order(c, c.T_max)


def jacobian_pre_norm(block, X):  # X' = Y + MLP(LN_2(Y)), Y = X + MHA(LN_1(X)), by jacrev
    def f(Z):
        Y = Z + block.attn(block.ln_1(Z)[None])[0]
        return Y + block.mlp(block.ln_2(Y))
    return torch.func.jacrev(f)(X)


def jacobian_feature_major(block, X):  # vec(X) taken column by column
    T, d = X.shape
    f = post_norm(block)
    return torch.autograd.functional.jacobian(lambda v: f(v.view(d, T).T).T.reshape(-1), X.T.reshape(-1))


def flops_causal_triangle(c, T):  # counts T(T+1)/2 score pairs per head: the causal triangle
    attention = 2 * 2 * c.d * (T + 1) / 2
    return 3 * (2 * c.d * c.V + c.L * (8 * c.d * c.d + 4 * c.d * c.d_ff + attention))


def flops_qkv_once(c, T):  # W_Q, W_K, W_V counted as one d x d product
    return 3 * (2 * c.d * c.V + c.L * (2 * 2 * c.d * c.d + 4 * c.d * c.d_ff + 4 * T * c.d))


def takeover_roots(c):  # numpy's root of 4 d T^2 - (8 d^2 + 4 d d_ff) T
    return max(np.roots([4 * c.d, -(8 * c.d * c.d + 4 * c.d * c.d_ff), 0]).real)


def dependency_map_loop(model, idx):  # x_s moved half the vocabulary around, numpy bool map
    V, T = model.config.V, idx.shape[0]
    with torch.no_grad():
        base = model(idx)
        rows = []
        for s in range(T):
            x = idx.clone()
            x[s] = (x[s] + V // 2) % V
            rows.append((model(x) - base).abs().amax(-1) > 1e-6)  # (T,): which Z_t moved
    return torch.stack(rows, 1).numpy()  # (T, T) bool, [t, s]


def dependency_map_norm(model, idx):  # L2 norm of the change, float map, all perturbations in one batch
    V, T = model.config.V, idx.shape[0]
    with torch.no_grad():
        x = idx.repeat(T, 1)  # (T, T): row s changes x_s
        x[torch.arange(T), torch.arange(T)] = (idx + 1) % V
        Z = torch.stack([model(row) for row in x])  # (T, T, V)
        return (Z - model(idx)).norm(dim=-1).T  # [t, s]


def dependency_map_causal_only(model, idx):  # assumes causality: only s <= t tried
    full = torch.as_tensor(dependency_map_loop(model, idx))
    return torch.tril(full)


def dependency_map_max_token(model, idx):  # replaces x_s by V - 1: no change where x_s = V - 1
    T, V = idx.shape[0], model.config.V
    with torch.no_grad():
        base = model(idx)
        M = torch.zeros(T, T)
        for s in range(T):
            x = idx.clone()
            x[s] = V - 1
            M[:, s] = (model(x) - base).abs().amax(-1)
    return M


def layer_norm_rescale(v, eps):  # v is centred already: layer_norm without affine is the rescaling
    return F.layer_norm(v, v.shape[-1:], eps=eps)


def rescale_numpy_float32(v, eps):
    v = np.asarray(v, dtype=np.float32)
    return v / np.sqrt((v * v).mean(-1, keepdims=True) + np.float32(eps))


def rescale_whole_norm(v, eps):  # the norm of the whole tensor, times sqrt(d)
    return v * math.sqrt(v.shape[-1]) / torch.sqrt(v.pow(2).sum() + eps)


def rescale_float16(v, eps):
    v16 = v.half()
    return (v16 / torch.sqrt(v16.pow(2).mean(-1, keepdim=True) + eps)).double()


def project_mean_of_columns(u):  # mean over the first axis of a 2-d view of all rows
    flat = u.reshape(-1, u.shape[-1])
    return (flat - flat.mean(0)).reshape(u.shape)


CENTRE = lambda u: u - u.mean(-1, keepdims=True)  # noqa: E731
RMS = lambda v, eps: v / torch.sqrt(v.pow(2).mean(-1, keepdim=True) + eps)  # noqa: E731


def dependency_map_probabilities(model, idx):  # compares softmax probabilities, perturbation by a local generator
    V, T = model.config.V, idx.shape[0]
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        base = model(idx).softmax(-1)
        M = torch.zeros(T, T, dtype=torch.int64)
        for s in range(T):
            x = idx.clone()
            x[s] = (x[s] + torch.randint(1, V, (), generator=g)) % V
            M[:, s] = ((model(x).softmax(-1) - base).abs().amax(-1) > 1e-9).long()
    return M


def dependency_map_batched(model, idx):  # every perturbation in one (T + 1, T) batch
    V, T = model.config.V, idx.shape[0]
    x = idx.repeat(T + 1, 1)
    x[torch.arange(1, T + 1), torch.arange(T)] = (idx + 3) % V
    with torch.no_grad():
        Z = model(x)  # (T + 1, T, V)
    return (Z[1:] - Z[0]).abs().amax(-1).T  # [t, s]


def dependency_map_no_modulo(model, idx):  # x_s + 1 without wrapping: token V is out of range
    T = idx.shape[0]
    M = torch.zeros(T, T)
    for s in range(T):
        x = idx.clone()
        x[s] += 1
        M[:, s] = (model(x) - model(idx)).abs().amax(-1).detach()
    return M


def dependency_map_argmax(model, idx):  # only whether the predicted token changes
    V, T = model.config.V, idx.shape[0]
    M = torch.zeros(T, T)
    for s in range(T):
        x = idx.clone()
        x[s] = (x[s] + 5) % V
        M[:, s] = (model(x).argmax(-1) != model(idx).argmax(-1)).float()
    return M


def dependency_map_loose(model, idx):  # a threshold of 0.01: small models' changes are smaller
    return torch.as_tensor(dependency_map_norm(model, idx) > 1e-2)


def factor_dimension_measured(d, k):  # 2 d k minus the rank of the product map's Jacobian at random factors
    g = torch.Generator().manual_seed(d + k)
    W_Q, W_K = torch.randn(d, k, generator=g, dtype=torch.float64), torch.randn(d, k, generator=g, dtype=torch.float64)
    J = torch.autograd.functional.jacobian(lambda A, B: A @ B.T, (W_Q, W_K))  # two (d, d, d, k)
    J = torch.cat([part.reshape(d * d, d * k) for part in J], 1)
    return 2 * d * k - torch.linalg.matrix_rank(J).item()


def flops_six_n_plus_attention(c, T):  # 6 N (matmul weights only) + 12 L T d, as numpy floats
    N = np.float64(c.L * (4 * c.d * c.d + 2 * c.d * c.d_ff) + c.d * c.V)
    return 6 * N + 12 * c.L * T * c.d


class EinsumHead(nn.Module):  # one head from raw (d, d_head) Parameters, einsum, a -1e9 mask from a buffer
    def __init__(self, d, d_head, scale="d_head"):
        super().__init__()
        self.W_Q, self.W_K, self.W_V = (nn.Parameter(torch.randn(d, d_head) / d ** 0.5) for _ in range(3))
        self.register_buffer("future", torch.ones(64, 64, dtype=torch.bool).triu(1))
        self.scale = d_head if scale == "d_head" else d

    def forward(self, x):  # (B, T, d) -> (B, T, d_head)
        T = x.shape[1]
        q, k, v = (torch.einsum("btd,de->bte", x, W) for W in (self.W_Q, self.W_K, self.W_V))
        S = torch.einsum("bte,bse->bts", q, k) / math.sqrt(self.scale)
        return S.masked_fill(self.future[:T, :T], -1e9).softmax(-1) @ v


def jacobian_float32(block, X):  # the learner's whole computation in float32
    block, X = block.float(), X.float()
    return jacobian_functional(block, X)


def circuits_off_by_one_slice(attn, h):  # W_O^h taken one head further on
    d_head = attn.W_Q.shape[-1]
    g = (h + 1) % attn.W_Q.shape[0]
    return attn.W_Q[h] @ attn.W_K[h].T, attn.W_V[h] @ attn.W_O[g * d_head:(g + 1) * d_head]


# ---- the build track's components ---------------------------------------------------------------


class FunctionalLayerNorm(nn.Module):  # weight/bias names, F.layer_norm
    def __init__(self, d):
        super().__init__()
        self.weight, self.bias = nn.Parameter(torch.ones(d)), nn.Parameter(torch.zeros(d))

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class UnbiasedLayerNorm(FunctionalLayerNorm):
    def forward(self, x):
        return self.weight * (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + 1e-5) + self.bias


class RMSOnlyNorm(FunctionalLayerNorm):  # no centring: RMSNorm with a shift
    def forward(self, x):
        return self.weight * x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) + self.bias


class EinsumMLP(nn.Module):
    def __init__(self, d, d_ff, approximate="none"):
        super().__init__()
        self.W_in, self.b_in = nn.Parameter(torch.randn(d, d_ff) / d ** 0.5), nn.Parameter(torch.zeros(d_ff))
        self.W_out, self.b_out = nn.Parameter(torch.randn(d_ff, d) / d_ff ** 0.5), nn.Parameter(torch.zeros(d))
        self.approximate = approximate

    def forward(self, x):
        h = F.gelu(torch.einsum("btd,df->btf", x, self.W_in) + self.b_in, approximate=self.approximate)
        return torch.einsum("btf,fd->btd", h, self.W_out) + self.b_out


class ReluMLP(EinsumMLP):
    def forward(self, x):
        return torch.relu(x @ self.W_in + self.b_in) @ self.W_out + self.b_out


# ---- the cases: (checker, answer factory, None = must pass, else a word the failure must name) ---

C = exercises
CASES = {
    # Exercise 1, count(config)
    "count by rows": (C.check_parameter_count, lambda: count_by_rows, OK),
    "count from a list of shapes": (C.check_parameter_count, lambda: count_by_shapes, OK),
    "count as numpy int64": (C.check_parameter_count, lambda: lambda c: np.int64(count_by_rows(c)), OK),
    "count as float": (C.check_parameter_count, lambda: lambda c: float(count_by_rows(c)), OK),
    "count as a 0-d tensor": (C.check_parameter_count, lambda: lambda c: torch.tensor(count_by_rows(c)), OK),
    "count ignoring tying": (C.check_parameter_count, lambda: lambda c: count_by_rows(c.replace(tie_weights=False)), "tied"),
    "count with H full-width heads": (C.check_parameter_count,
                                      lambda: lambda c: count_by_rows(c) + 3 * c.L * c.d * c.d * (c.H - 1), "row by row"),
    "count with b_1 of 4d entries": (C.check_parameter_count,
                                     lambda: lambda c: count_by_rows(c) + c.L * (4 * c.d - c.d_ff), "b_1 with 4d"),
    "count with LN_f gains only": (C.check_parameter_count, lambda: lambda c: count_by_rows(c) - c.d, "wrong"),
    "count with 12 L d^2 built in": (C.check_parameter_count, lambda: lambda c: (
        2 * c.V * c.d - (c.V * c.d if c.tie_weights else 0) + c.T_max * c.d + c.L * (12 * c.d ** 2 + 10 * c.d) + 2 * c.d),
        "d_ff"),
    "count course number as numpy": (C.check_parameter_count, lambda: np.int64(816_640), OK),
    "count course number off by LN_f": (C.check_parameter_count, lambda: 816_640 - 256, "LN_f"),
    # Exercise 1, the table
    "table as a numpy array": (C.check_parameter_table, lambda: np.array(COURSE_ROWS), OK),
    "table function returning a tensor": (C.check_parameter_table, lambda: lambda c: torch.tensor(table_rows(c)), OK),
    "table of numpy ints": (C.check_parameter_table, lambda: [np.int64(r) for r in COURSE_ROWS], OK),
    "table with the MLP at 8d^2 + 5d": (C.check_parameter_table, lambda: lambda c: [
        *table_rows(c)[:2], c.L * (8 * c.d * c.d + 5 * c.d), *table_rows(c)[3:]], "d_ff"),
    "table with qkv biases": (C.check_parameter_table,
                              lambda: lambda c: [table_rows(c)[0], table_rows(c)[1] + 3 * c.L * c.d] + table_rows(c)[2:],
                              "W_Q"),
    "table with four rows": (C.check_parameter_table, lambda: COURSE_ROWS[:4], "five"),
    "table as a dict with the learner's own keys": (C.check_parameter_table, lambda: dict(
        zip(("embeddings", "attention", "mlp", "block_norms", "final"), COURSE_ROWS)), OK),
    "table with attention and MLP swapped": (C.check_parameter_table, lambda: [
        COURSE_ROWS[0], COURSE_ROWS[2], COURSE_ROWS[1], *COURSE_ROWS[3:]], "off by"),
    # Exercise 5
    "tied count as a number, numpy": (C.check_tied_count, lambda: np.int64(816_640 - 65 * 128), OK),
    "tied count as the untied number": (C.check_tied_count, lambda: 816_640, "E counted twice"),
    "tied count reading tie_weights wrong way": (C.check_tied_count,
                                                 lambda: lambda c: count_by_rows(c.replace(tie_weights=False)), "twice"),
    "tied count as untied minus Vd": (C.check_tied_count,
                                      lambda: lambda c: count_by_rows(c.replace(tie_weights=False)) - c.V * c.d, OK),
    "tied count from a list of shapes": (C.check_tied_count, lambda: count_by_shapes, OK),
    "tied count minus 2Vd": (C.check_tied_count, lambda: lambda c: count_by_rows(c) - c.V * c.d, "twice"),
    "tied count minus T_max d": (C.check_tied_count, lambda: lambda c: count_by_rows(c) - c.T_max * c.d, "positional"),
    "tied count as a Fraction": (C.check_tied_count, lambda: lambda c: Fraction(count_by_rows(c)), OK),
    # Exercise 2, check_causality
    "ModuleDict GPT": (C.check_causality, seeded(lambda: LearnerGPT()), OK),
    "GPT in train mode with dropout": (C.check_causality, seeded(lambda: LearnerGPT(dropout=0.3).train()), OK),
    "GPT in bfloat16": (C.check_causality, seeded(lambda: LearnerGPT().to(torch.bfloat16)), OK),
    "GPT in float64": (C.check_causality, seeded(lambda: LearnerGPT().double()), OK),
    "GPT with one qkv Parameter": (C.check_causality, seeded(lambda: LearnerGPT(per_head=False)), OK),
    "GPT with post-norm blocks": (C.check_causality, seeded(lambda: LearnerGPT(post_norm=True)), OK),
    "running-mean model (a plain function)": (C.check_causality, seeded(prefix_mean_model), OK),
    "GPT whose mask keeps the diagonal hidden too": (C.check_causality, seeded(lambda: LearnerGPT(mask_offset=0)), "NaN"),
    "GPT whose mask is off by two": (C.check_causality, seeded(lambda: LearnerGPT(mask_offset=3, L=1)), "future"),
    "suffix-mean model": (C.check_causality, seeded(lambda: prefix_mean_model(reverse=True)), "future"),
    "convolution padded both sides": (C.check_causality, seeded(conv_lookahead), "future"),
    "nn.MultiheadAttention without batch_first": (C.check_causality, seeded(TorchMHABatchMixer), "batch"),
    "GPT with F.dropout always on": (C.check_causality, seeded(AlwaysDropout), "random"),
    "GPT returning a dict": (C.check_causality, seeded(lambda: LearnerGPT(returns="dict")), "logits"),
    # Exercise 2, check_dependency_map
    "map: numpy bool, loop over s": (C.check_dependency_map, lambda: dependency_map_loop, OK),
    "map: L2 norms, float": (C.check_dependency_map, lambda: dependency_map_norm, OK),
    "map: lower triangle only": (C.check_dependency_map, lambda: dependency_map_causal_only, "unmasked"),
    "map: x_s set to V - 1": (C.check_dependency_map, lambda: dependency_map_max_token, "no-op"),
    "map: softmax probabilities, int map": (C.check_dependency_map, lambda: dependency_map_probabilities, OK),
    "map: one batch of perturbations": (C.check_dependency_map, lambda: dependency_map_batched, OK),
    "map: x_s + 1 without modulo": (C.check_dependency_map, lambda: dependency_map_no_modulo, "[0, V)"),
    "map: argmax changes only": (C.check_dependency_map, lambda: dependency_map_argmax, "map"),
    "map: threshold 0.01": (C.check_dependency_map, lambda: dependency_map_loose, "map"),
    "GPT masking after the softmax": (C.check_causality, seeded(lambda: LearnerGPT(mask="after softmax")), "after the softmax"),
    "GPT with an inverted mask": (C.check_causality, seeded(lambda: LearnerGPT(mask="inverted")), "future"),
    "GPT masking with -1e9": (C.check_causality, seeded(lambda: LearnerGPT(mask="-1e9")), OK),
    "model with a LayerNorm over (T, d)": (C.check_causality, seeded(lambda: lambda idx, E=nn.Embedding(23, 8): F.layer_norm(
        E(idx), (idx.shape[1], 8))), "normalization"),
    # Exercise 3
    "dimension measured by a Jacobian's rank": (C.check_factor_pair_dimension, lambda: factor_dimension_measured, OK),
    "d_head^2 as a float": (C.check_factor_pair_dimension, lambda: lambda d, k: float(k * k), OK),
    "d_head^2 as a tensor": (C.check_factor_pair_dimension, lambda: lambda d, k: torch.tensor(k) ** 2, OK),
    "d_head^2 as numpy": (C.check_factor_pair_dimension, lambda: lambda d, k: np.square(np.int32(k)), OK),
    "(d - d_head)^2": (C.check_factor_pair_dimension, lambda: lambda d, k: (d - k) ** 2, "R"),
    "d_head^2 + 1": (C.check_factor_pair_dimension, lambda: lambda d, k: k * k + 1, "R"),
    "d_head (d_head - 1)": (C.check_factor_pair_dimension, lambda: lambda d, k: k * (k - 1), "R"),
    # Exercise 4
    "numpy projector matrix, layer_norm rescale": (C.check_layer_norm, lambda: (ones_projector, layer_norm_rescale), OK),
    "centring, numpy float32 rescale": (C.check_layer_norm, lambda: (CENTRE, rescale_numpy_float32), OK),
    "rescale by the whole tensor's norm": (C.check_layer_norm, lambda: (CENTRE, rescale_whole_norm), "rescale"),
    "rescale in float16": (C.check_layer_norm, lambda: (CENTRE, rescale_float16), "rescale"),
    "projection centring columns of a 2-d view": (C.check_layer_norm, lambda: (project_mean_of_columns, RMS), "row by row"),
    "decay factors as a numpy array": (C.check_weight_decay, lambda: lambda c: np.array([1 / c, c ** -2]), OK),
    "decay factors measured in float32": (C.check_weight_decay, lambda: measured_decay, OK),
    "decay factors as Fractions": (C.check_weight_decay, lambda: lambda c: (1 / Fraction(c), 1 / Fraction(c) ** 2), OK),
    "decay factors as numpy float32": (C.check_weight_decay, lambda: lambda c: (np.float32(1 / c), np.float32(c ** -2)), OK),
    "decay factors (c, c^2)": (C.check_weight_decay, lambda: lambda c: (c, c * c), "inverted"),
    "rescale by rsqrt, project by [..., None]": (C.check_layer_norm, lambda: (
        lambda u: u - u.mean(-1)[..., None], lambda v, eps: v * torch.rsqrt(v.var(-1, unbiased=False, keepdim=True) + eps)), OK),
    "rescale by std + eps": (C.check_layer_norm, lambda: (CENTRE, lambda v, eps: v / (v.std(-1, keepdim=True) + eps)),
                             "unbiased"),
    "decay factors (1/c, 1/c)": (C.check_weight_decay, lambda: lambda c: (1 / c, 1 / c), "relative to"),
    "decay factors (1/c^2, 1/c^3)": (C.check_weight_decay, lambda: lambda c: (c ** -2, c ** -3), "differ"),
    "decay factors as a list, under no_grad": (C.check_weight_decay, lambda: torch.no_grad()(lambda c: [1 / c, c ** -2]), OK),
    # Exercise 6
    "circuits in numpy": (C.check_head_circuits, lambda: circuits_numpy, OK),
    "circuits by multi_dot in float32": (C.check_head_circuits, lambda: circuits_view, OK),
    "circuits as one stacked array": (C.check_head_circuits, lambda: lambda a, h: np.stack(circuits_numpy(a, h)), OK),
    "W_O columns via reshape": (C.check_head_circuits, lambda: circuits_o_columns, "columns"),
    "W_QK over sqrt(d)": (C.check_head_circuits, lambda: circuits_scaled_by_d, "scale"),
    "circuits swapped": (C.check_head_circuits, lambda: circuits_swapped, "differs"),
    "W_QK by einsum, W_OV by view": (C.check_head_circuits, lambda: lambda a, h: (
        torch.einsum("ik,jk->ij", a.W_Q[h], a.W_K[h]), circuits_view(a, h)[1]), OK),
    "W_O^h one head further on": (C.check_head_circuits, lambda: circuits_off_by_one_slice, "W_OV"),
    "rank of S as T": (C.check_rank_bounds, lambda: lambda d, H, T: (d // H, d // H, T), "factors through"),
    "ranks by matrix_rank": (C.check_rank_bounds, lambda: measured_rank_bounds, OK),
    "ranks by SVD threshold": (C.check_rank_bounds, lambda: lambda d, H, T: measured_rank_bounds(d, H, T, svd=True), OK),
    "ranks as floats from d / H": (C.check_rank_bounds, lambda: lambda d, H, T: np.array([d / H, d / H, min(T, d / H)]), OK),
    "rank of S one less (softmax)": (C.check_rank_bounds, lambda: lambda d, H, T: (d // H, d // H, min(T, d // H) - 1),
                                     "violated"),
    "rank of W_OV as d": (C.check_rank_bounds, lambda: lambda d, H, T: (d // H, d, min(T, d // H)), "tight"),
    # Exercise 7
    "autograd.functional.jacobian": (C.check_post_norm_jacobian, lambda: jacobian_functional, OK),
    "central differences in numpy": (C.check_post_norm_jacobian, lambda: jacobian_central_differences, OK),
    "jacrev, (T, d, T, d)": (C.check_post_norm_jacobian, lambda: jacobian_vmap_jacrev, OK),
    "autograd.functional.jacobian in float32": (C.check_post_norm_jacobian, lambda: jacobian_float32, OK),
    "pre-norm block by jacrev": (C.check_post_norm_jacobian, lambda: jacobian_pre_norm, "pre-norm"),
    "vec column by column": (C.check_post_norm_jacobian, lambda: jacobian_feature_major, "feature-major"),
    "LayerNorms swapped": (C.check_post_norm_jacobian, lambda: jacobian_swapped_norms, "differs"),
    "MLP on the block's input": (C.check_post_norm_jacobian, lambda: jacobian_mlp_on_input, "differs"),
    "statement 'B.'": (C.check_post_norm_statement, lambda: "B.", OK),
    "statement printed line": (C.check_post_norm_statement, lambda: C.statements().splitlines()[1], OK),
    "statement ' (b) '": (C.check_post_norm_statement, lambda: " (b) ", OK),
    "statement 'e'": (C.check_post_norm_statement, lambda: "e", "pre-norm"),
    "statement ['b']": (C.check_post_norm_statement, lambda: ["b"], "one letter"),
    "statement 'c'": (C.check_post_norm_statement, lambda: "c", "residual"),
    "statement 'ab'": (C.check_post_norm_statement, lambda: "ab", "one letter"),
    # Exercise 8
    "flops in another order": (C.check_training_flops, lambda: flops_other_order, OK),
    "flops as a Fraction": (C.check_training_flops, lambda: flops_fraction, OK),
    "flops measured on an own model": (C.check_training_flops, lambda: flops_measured, OK),
    "flops as 6N + 12 L T d in numpy": (C.check_training_flops, lambda: flops_six_n_plus_attention, OK),
    "flops with backward as one forward": (C.check_training_flops, lambda: flops_backward_once, "twice the forward"),
    "flops with the attention term at T_max": (C.check_training_flops, lambda: flops_with_T_max, "T_max"),
    "flops over the causal triangle": (C.check_training_flops, lambda: flops_causal_triangle, "differs"),
    "flops with Q, K, V as one product": (C.check_training_flops, lambda: flops_qkv_once, "differs"),
    "takeover by np.roots": (C.check_attention_takeover, lambda: takeover_roots, OK),
    "takeover as a tensor": (C.check_attention_takeover, lambda: lambda c: torch.tensor(2 * c.d + c.d_ff), OK),
    "takeover at d_ff": (C.check_attention_takeover, lambda: lambda c: c.d_ff, "below"),
    "takeover at 2d + d_ff + 1": (C.check_attention_takeover, lambda: lambda c: 2 * c.d + c.d_ff + 1, "beyond"),
    "takeover at 4d": (C.check_attention_takeover, lambda: lambda c: 4 * c.d, "below"),
    # build track
    "LayerNorm via F.layer_norm": (build_track.check_layer_norm_module, lambda: FunctionalLayerNorm, OK),
    "LayerNorm with torch.var": (build_track.check_layer_norm_module, lambda: UnbiasedLayerNorm, "unbiased"),
    "LayerNorm without centring": (build_track.check_layer_norm_module, lambda: RMSOnlyNorm, "RMSNorm"),
    "MLP in einsum": (build_track.check_mlp, lambda: EinsumMLP, OK),
    "MLP with tanh GELU": (build_track.check_mlp, lambda: lambda d, d_ff: EinsumMLP(d, d_ff, "tanh"), "tanh"),
    "MLP with ReLU": (build_track.check_mlp, lambda: ReluMLP, "ReLU"),
    "head in einsum with a -1e9 mask": (build_track.check_attention_head, lambda: EinsumHead, OK),
    "head scaled by sqrt(d)": (build_track.check_attention_head, lambda: lambda d, k: EinsumHead(d, k, scale="d"), "sqrt(d)"),
    "block with ModuleDict parts": (build_track.check_block, lambda: Block, OK),
    "post-norm block": (build_track.check_block, lambda: lambda d, H, d_ff: Block(d, H, d_ff, post_norm=True), "post"),
    "block masking after the softmax": (build_track.check_block,
                                        lambda: lambda d, H, d_ff: Block(d, H, d_ff, mask="after softmax"), "softmax"),
    "GPT with ModuleDict blocks, (logits, loss)": (build_track.check_gpt, lambda: LearnerGPT, OK),
    "GPT with no LN_f": (build_track.check_gpt, lambda: lambda *sizes: LearnerGPT(*sizes, final_norm=False), "LN_f"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_review_answer(name):
    check, answer, mistake = CASES[name]
    answer = answer()
    if check is C.check_layer_norm:
        result = check(*answer)
    else:
        result = check(answer)
    if mistake is OK:
        assert result.status == PASSED, result
    else:
        assert not result.passed, result
        assert mistake.lower() in result.message.lower(), result


# ---- check_own_model --------------------------------------------------------------------------

OWN = {
    "ModuleDict blocks, per-head Linear": (lambda: LearnerGPT(), {}, OK, None),
    "HF-like config, tied through F.linear": (lambda: LearnerGPT(tied=True), {}, OK, None),
    "one qkv Parameter (3, d, d)": (lambda: LearnerGPT(per_head=False), {}, OK, None),
    "weights in bfloat16": (lambda: LearnerGPT().to(torch.bfloat16), {}, OK, None),
    "float64, d_ff = 2d": (lambda: LearnerGPT(d_ff=48).double(), dict(d_ff=48), OK, None),
    "dropout in train mode": (lambda: LearnerGPT(dropout=0.2).train(), {}, OK, None),
    "H given": (lambda: LearnerGPT(), dict(H=3), OK, None),
    "no final LayerNorm": (lambda: LearnerGPT(final_norm=False), {}, "parameter count", "LN_f"),
    "no final LayerNorm, tied": (lambda: LearnerGPT(final_norm=False, tied=True), {}, "parameter count", "LN_f"),
    "one block shared L times": (lambda: LearnerGPT(shared_blocks=True), {}, "parameter count", "L = 1"),
    "qkv biases": (lambda: LearnerGPT(qkv_bias=True), {}, OK, None),
    "d_ff = 3d, not said": (lambda: LearnerGPT(d_ff=72), {}, "parameter count", "d_ff = 72"),
    "P one row longer than T_max": (lambda: LearnerGPT(T_max=13), {}, "parameter count", "T_max were 13"),
    "masking after the softmax": (lambda: LearnerGPT(mask="after softmax"), {}, "causality", "after the softmax"),
    "masking with -1e9, float64": (lambda: LearnerGPT(mask="-1e9").double(), {}, OK, None),
    "mask off by one, two layers": (lambda: LearnerGPT(mask_offset=2), {}, "causality", "off by one"),
    "batch mixer": (lambda: TorchMHABatchMixer(), dict(L=1), "batch independence", "mixes"),
    "weights of std 1": (lambda: LearnerGPT().apply(large_init),
                         {}, "initial loss", "uniform"),
    "returns a dict": (lambda: LearnerGPT(returns="dict"), {}, "Your own GPT", "logits"),
    "F.dropout always on": (AlwaysDropout, {}, "Your own GPT", "random"),
}


@pytest.mark.parametrize("name", list(OWN))
def test_review_own_model(name):
    make, sizes, failing_part, word = OWN[name]
    torch.manual_seed(0)
    report = C.check_own_model(make(), **{**SIZES, **sizes})
    if failing_part is OK:
        assert report.status == PASSED, report
        return
    assert not report.passed, report
    parts = {part.exercise: part for part in report.parts} or {report.exercise: report}
    assert not parts[failing_part].passed, report
    assert word.lower() in parts[failing_part].message.lower(), report
