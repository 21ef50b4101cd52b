"""The GPT of Lecture 5, Sections 1-5, written so that each line reads like the lecture.

Where the lecture's definition is written out, it is a method named `definition`; the method a
model runs is its fast form, tested equal to it (tests/test_model.py):

    Definition 1.1  MultiHeadAttention.definition   fast form: MultiHeadAttention.forward
    Definition 2.1  MLP.forward
    Definition 3.1  Block.forward                   variants beside it: PostNormBlock (Aside 3.5),
                                                    AttentionOnlyBlock; make_block(config) picks one
    Definition 4.1  LayerNorm.definition            fast form: LayerNorm.forward
    Section 5       GPT.forward

Nothing but the lecture's formulas runs through the forward methods. The intermediates a reader may
want (X^(l), Y^(l), A^h, the LayerNorm outputs, Z) are each the output of one module, listed by
GPT.intermediates(): a LayerNorm, MultiHeadAttention or MLP where the value is one, else a
HookPoint, an identity placed where the value is formed. gptlib.analysis.cache records them with torch's
forward hooks, as TransformerLens does with its HookPoints. attention_matrices_formed(model) makes
every attention form A^h instead of calling the fused kernel, for as long as it lasts.

Conventions: feature vectors are rows, so a sequence is X of shape (T, d) and a batch
(B, T, d). Weights keep the lecture's shapes: W_Q^h = attn.W_Q[h] of shape (d, d_head),
W_O of shape (d, d) acting as [C^1 | ... | C^H] W_O, W_1 of shape (d_ff, d) acting on a
column u as W_1 u (so on rows as X W_1^T), E (V, d), P (T_max, d), W_U (d, V).
"""

from __future__ import annotations

import contextlib
import math

import torch
import torch.nn.functional as F
from torch import nn

from . import validation
from .config import GPTConfig

# The names of the intermediates, the lecture's symbols: a block's intermediates() names its
# BLOCK_INTERMEDIATES (ln_2 and mlp_write only with an MLP; A is formed only while
# attention_matrices_formed); the GPT's names each of them and each X^(l) as intermediate_key(name, l),
# then FINAL_INTERMEDIATES. gptlib.analysis.cache records them under these names.
BLOCK_INTERMEDIATES = ("ln_1", "A", "attn_write", "Y", "ln_2", "mlp_write")
FINAL_INTERMEDIATES = ("ln_f", "Z")


def intermediate_key(name: str, l: int) -> str:
    """The key of layer l's `name` among a GPT's intermediates: intermediate_key("A", 2) == "A.2"."""
    return f"{name}.{l}"


class HookPoint(nn.Identity):
    """The place in the forward pass where an intermediate no module outputs is formed: it hands its input on
    unchanged. Its name is the intermediate's, given by the block's or the GPT's intermediates(); a forward hook
    registered on it (torch's register_forward_hook; gptlib.analysis.cache.recording) sees the tensor that passes.
    It holds no parameters, so a state_dict is the same with or without hook points."""


def next_token_loss(Z: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The mean cross-entropy of logits Z (..., V) against token ids targets (...), nats per token."""
    return F.cross_entropy(Z.reshape(-1, Z.shape[-1]), targets.reshape(-1))


class LayerNorm(nn.Module):
    """Definition 4.1: LN(u) = gamma * (u - mean(u) 1) / sqrt(sigma(u)^2 + eps) + beta, each row alike.

    eps must be > 0: a constant row has sigma(u) = 0, and only eps keeps its denominator from
    zero (there LN(u) = beta). Proposition 4.2's eps = 0 is studied on rows in gptlib.analysis.layernorm.
    """

    def __init__(self, d: int, eps: float):
        super().__init__()
        self.eps = validation.real("eps", eps, above=0)
        self.gamma = nn.Parameter(torch.ones(d))  # (d,)
        self.beta = nn.Parameter(torch.zeros(d))  # (d,)

    def definition(self, u: torch.Tensor) -> torch.Tensor:  # (..., d) -> (..., d)
        """Definition 4.1 as the lecture writes it."""
        centred = u - u.mean(dim=-1, keepdim=True)  # u - mean(u) 1, (..., d)
        variance = centred.pow(2).mean(dim=-1, keepdim=True)  # sigma(u)^2, dividing by d, (..., 1)
        return self.gamma * centred / torch.sqrt(variance + self.eps) + self.beta

    def forward(self, u: torch.Tensor) -> torch.Tensor:  # (..., d) -> (..., d)
        """The fast form of Definition 4.1: torch's fused layer_norm kernel, one pass over each row."""
        return F.layer_norm(u, self.gamma.shape, self.gamma, self.beta, self.eps)


class MultiHeadAttention(nn.Module):
    """Definition 1.1: MHA(X) = [Attn^1(X) | ... | Attn^H(X)] W_O + b_O, causally masked."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        H, d, d_head = config.H, config.d, config.d_head
        self.H, self.d_head, self.causal = H, d_head, config.causal
        self.W_Q = nn.Parameter(torch.empty(H, d, d_head))  # W_Q[h] = W_Q^h
        self.W_K = nn.Parameter(torch.empty(H, d, d_head))  # W_K[h] = W_K^h
        self.W_V = nn.Parameter(torch.empty(H, d, d_head))  # W_V[h] = W_V^h
        self.W_O = nn.Parameter(torch.empty(d, d))  # rows h*d_head:(h+1)*d_head are W_O^h
        self.b_O = nn.Parameter(torch.zeros(d))
        self.forms_A = False  # True: forward forms every A^h (attention_matrices_formed sets it for a while)
        self.hook_A = HookPoint()  # A^h of every head, (B, H, T, T), when forms_A

    def W_O_head(self, h: int) -> torch.Tensor:
        """The block W_O^h of shape (d_head, d) that head h's output multiplies."""
        return self.W_O[h * self.d_head : (h + 1) * self.d_head]

    def mask(self, T: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """M (T, T): -inf where s > t (the future) when causal, 0 elsewhere; added to every S^h."""
        M = torch.zeros(T, T, dtype=dtype, device=device)  # (T, T)
        return torch.full_like(M, float("-inf")).triu(1) if self.causal else M

    def definition(self, X: torch.Tensor) -> torch.Tensor:  # (B, T, d) -> (B, T, d)
        """Definition 1.1 as the lecture writes it, head by head:
        Attn^h(X) = softmax(X W_Q^h (X W_K^h)^T / sqrt(d_head) + M) X W_V^h,
        MHA(X) = [Attn^1(X) | ... | Attn^H(X)] W_O + b_O.
        """
        X = validation.batch(X, self.W_O.shape[0])
        M = self.mask(X.shape[1], X.dtype, X.device)  # (T, T)
        heads = []
        for h in range(self.H):
            S = (X @ self.W_Q[h]) @ (X @ self.W_K[h]).transpose(1, 2) / math.sqrt(self.d_head) + M  # S^h, (B, T, T)
            heads.append(S.softmax(dim=-1) @ X @ self.W_V[h])  # Attn^h(X) = A^h X W_V^h, (B, T, d_head)
        return torch.cat(heads, dim=-1) @ self.W_O + self.b_O  # (B, T, d)

    def qkv(self, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Per-head queries, keys and values X W_Q^h, X W_K^h, X W_V^h, each (B, H, T, d_head), for the fast form.

        All 3H products are one matmul, X [W_Q^1 | ... | W_Q^H | W_K^1 | ... | W_V^H], whose weights
        are concatenated (one copy of the weights, (d, 3d)); the heads are then views into its
        (B, T, 3H, d_head) result, with no copy of the activations.
        """
        B, T, d = X.shape
        W = torch.cat([W.transpose(0, 1) for W in (self.W_Q, self.W_K, self.W_V)], dim=1)  # (d, 3H, d_head), one copy
        W = W.view(d, 3 * d)  # (d, 3H d_head)
        heads = (X @ W).view(B, T, 3 * self.H, self.d_head)  # (B, T, 3H, d_head)
        return tuple(part.transpose(1, 2) for part in heads.split(self.H, dim=2))

    def attention_matrices(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """A^h = softmax(S^h), S^h = Q^h K^h^T / sqrt(d_head) + M for every head: (B, H, T, T).

        The T x T scores are the large tensors here, so they are written once: baddbmm adds
        the scaled product to the mask M inside the matrix multiply.
        """
        B, H, T, d_head = q.shape
        M = self.mask(T, q.dtype, q.device)  # (T, T)
        S = torch.baddbmm(M, q.flatten(0, 1), k.flatten(0, 1).transpose(1, 2), alpha=1 / math.sqrt(d_head))
        return S.view(B, H, T, T).softmax(dim=-1)  # rows of A^h sum to 1

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        """The fast form of Definition 1.1: X (B, T, d) -> MHA(X) (B, T, d), all heads at once.

        The fused scaled_dot_product_attention kernel computes every head's A^h V^h without ever
        holding A^h. With forms_A set, every A^h is formed instead (attention_matrices), passed
        through hook_A, and multiplied into the values: the form autograd's forward mode and
        FlopCounterMode can follow.
        """
        B, T, d = X.shape
        q, k, v = self.qkv(X)  # each (B, H, T, d_head)
        if self.forms_A:
            A = self.hook_A(self.attention_matrices(q, k))  # (B, H, T, T)
            C = A @ v  # (B, H, T, d_head): C^h = A^h X W_V^h
        else:
            C = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        C = C.transpose(1, 2).reshape(B, T, d)  # [C^1 | ... | C^H], (B, T, d)
        return torch.addmm(self.b_O, C.view(B * T, d), self.W_O).view(B, T, d)  # C W_O + b_O, one fused call


class MLP(nn.Module):
    """Definition 2.1: MLP(u) = W_2 GELU(W_1 u + b_1) + b_2, applied to every row alike."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        d, d_ff = config.d, config.d_ff
        self.W_1 = nn.Parameter(torch.empty(d_ff, d))
        self.b_1 = nn.Parameter(torch.zeros(d_ff))
        self.W_2 = nn.Parameter(torch.empty(d, d_ff))
        self.b_2 = nn.Parameter(torch.zeros(d))

    def forward(self, X: torch.Tensor) -> torch.Tensor:  # (B, T, d) -> (B, T, d)
        hidden = F.gelu(F.linear(X, self.W_1, self.b_1), approximate="none")  # (B, T, d_ff), t*Phi(t)
        return F.linear(hidden, self.W_2, self.b_2)  # (B, T, d)


class BaseBlock(nn.Module):
    """What every block is (Block, PostNormBlock, AttentionOnlyBlock: make_block returns one): its parts,
    LN_1, MHA and the hook point Y; with an MLP also LN_2 and the MLP.

    Which block a config asks for is chosen once, by class (make_block): a class refuses a config
    that asks for another one. The parts keep the names (and the order) of the checkpoints' keys.
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        if not isinstance(self, block_class(config)):
            raise ValueError(f"{type(self).__name__} is not the block of a config with norm={config.norm!r}, "
                             f"attn_only={config.attn_only}: that is {block_class(config).__name__} (make_block)")
        self.ln_1 = LayerNorm(config.d, config.ln_eps)
        self.attn = MultiHeadAttention(config)
        self.hook_Y = HookPoint()  # Y^(l), after the attention half
        if not config.attn_only:
            self.ln_2 = LayerNorm(config.d, config.ln_eps)
            self.mlp = MLP(config)

    def intermediates(self) -> dict[str, nn.Module]:
        """Each of BLOCK_INTERMEDIATES this block has, and the module whose output it is."""
        modules = {"ln_1": self.ln_1, "A": self.attn.hook_A, "attn_write": self.attn, "Y": self.hook_Y}
        if hasattr(self, "mlp"):
            modules.update(ln_2=self.ln_2, mlp_write=self.mlp)
        return modules


class Block(BaseBlock):
    """Definition 3.1, the pre-norm block."""

    def forward(self, X: torch.Tensor) -> torch.Tensor:  # X^(l) (B, T, d) -> X^(l+1) (B, T, d)
        Y = self.hook_Y(X + self.attn(self.ln_1(X)))  # Y = X + MHA(LN_1(X))
        return Y + self.mlp(self.ln_2(Y))  # X^(l+1) = Y + MLP(LN_2(Y))


class PostNormBlock(BaseBlock):
    """Aside 3.5's post-norm block (also Exercise 7's): each LayerNorm after its residual addition.
    Its ln_1 outputs Y and its ln_2 outputs X^(l+1)."""

    def forward(self, X: torch.Tensor) -> torch.Tensor:  # X^(l) (B, T, d) -> X^(l+1) (B, T, d)
        Y = self.hook_Y(self.ln_1(X + self.attn(X)))  # Y = LN_1(X + MHA(X))
        return self.ln_2(Y + self.mlp(Y))  # X^(l+1) = LN_2(Y + MLP(Y))


class AttentionOnlyBlock(BaseBlock):
    """The attention half of Definition 3.1 alone (config.attn_only, the induction model): no LN_2, no MLP."""

    def forward(self, X: torch.Tensor) -> torch.Tensor:  # X^(l) (B, T, d) -> X^(l+1) (B, T, d)
        return self.hook_Y(X + self.attn(self.ln_1(X)))  # X^(l+1) = Y = X + MHA(LN_1(X))


def block_class(config: GPTConfig) -> type[BaseBlock]:
    """The block a config asks for: AttentionOnlyBlock (attn_only), PostNormBlock (norm="post") or Block."""
    if config.attn_only:
        return AttentionOnlyBlock
    return PostNormBlock if config.norm == "post" else Block


def make_block(config: GPTConfig) -> BaseBlock:
    """A new block of the kind the config asks for (block_class)."""
    return block_class(config)(config)


class GPT(nn.Module):
    """Section 5: logits Z = LN_f(X^(L)) W_U for X^(0)_t = E[x_t] + P[t]."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        if not isinstance(config, GPTConfig):
            raise ValueError(f"config must be a GPTConfig, got {type(config).__name__}")
        self.config = config
        self.E = nn.Parameter(torch.empty(config.V, config.d))  # token embeddings, (V, d)
        self.P = nn.Parameter(torch.empty(config.T_max, config.d))  # positional embeddings, (T_max, d)
        self.hook_X = nn.ModuleList(HookPoint() for _ in range(config.L + 1))  # X^(0), ..., X^(L)
        self.blocks = nn.ModuleList(make_block(config) for _ in range(config.L))
        self.ln_f = LayerNorm(config.d, config.ln_eps)
        if not config.tie_weights:
            self.W_U = nn.Parameter(torch.empty(config.d, config.V))  # unembedding, (d, V)
        self.hook_Z = HookPoint()  # the logits Z, (B, T, V)
        self.reset_parameters()

    def intermediates(self) -> dict[str, nn.Module]:
        """Every named intermediate of a forward pass, in the order it is formed, and the module whose
        output it is: X^(l) as intermediate_key("X", l), each block's BLOCK_INTERMEDIATES as intermediate_key(name, l),
        then FINAL_INTERMEDIATES. gptlib.analysis.cache.recording hooks them."""
        modules = {intermediate_key("X", 0): self.hook_X[0]}
        for l, block in enumerate(self.blocks):
            modules.update((intermediate_key(name, l), module) for name, module in block.intermediates().items())
            modules[intermediate_key("X", l + 1)] = self.hook_X[l + 1]
        modules.update(ln_f=self.ln_f, Z=self.hook_Z)
        return modules

    @property
    def unembedding(self) -> torch.Tensor:
        """W_U of shape (d, V); E^T when weights are tied (Aside 5.3)."""
        return self.E.T if self.config.tie_weights else self.W_U

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """Project aside 5.2: N(0, std^2) weights; W_O and W_2 further scaled by 1/sqrt(2L).

        A model on the meta device holds shapes only (gptlib.analysis.cost, checkpoint validation), so
        there is nothing to draw; skipping also spares torch's Python fallback for meta normal_.
        """
        if self.E.is_meta:
            return
        std = self.config.init_std
        residual_std = std / math.sqrt(2 * self.config.L)
        for name, p in self.named_parameters():
            if name.endswith(("attn.W_O", "mlp.W_2")):
                nn.init.normal_(p, 0.0, residual_std)
            elif name.endswith(("gamma",)):
                nn.init.ones_(p)
            elif name.endswith(("beta", "b_O", "b_1", "b_2")):
                nn.init.zeros_(p)
            else:  # E, P, W_Q, W_K, W_V, W_1, W_U
                nn.init.normal_(p, 0.0, std)

    def check_tokens(self, idx: torch.Tensor, name: str = "token ids") -> torch.Tensor:
        """idx as int64 ids, after the checks of gptlib.validation.token_ids: a 1-D (T,) or 2-D (B, T)
        tensor of any integer dtype (not bool), non-empty, T <= T_max, every id in [0, V).
        """
        return validation.token_ids(idx, self.config.V, T_max=self.config.T_max, name=name)

    def check_embeddings(self, X: torch.Tensor) -> torch.Tensor:
        """X itself, if it is a residual stream X^(0) (B, T, d) this model can run (ValueError otherwise):
        the model's width d (validation.batch), B >= 1, 1 <= T <= T_max, and the dtype and
        device of the model's weights. Like check_tokens, it returns what it checked.
        """
        X = validation.batch(X, self.config.d)
        T_max = self.config.T_max
        if X.shape[0] < 1 or not 1 <= X.shape[1] <= T_max:
            raise ValueError(f"X must have B >= 1 and 1 <= T <= T_max={T_max}, got shape {tuple(X.shape)}")
        if X.dtype != self.E.dtype or X.device != self.E.device:
            raise ValueError(f"X must have the model's dtype {self.E.dtype} on {self.E.device}, "
                             f"got {X.dtype} on {X.device}")
        return X

    def embed(self, idx: torch.Tensor) -> torch.Tensor:
        """X^(0)_t = E[x_t] + P[t]: token ids (..., T) -> the residual stream's start (..., T, d).

        The ids are taken as valid; forward() checks them first (check_tokens). F.embedding(idx, E)
        is the row lookup E[idx], in the form whose backward is fastest (README, "How fast is it?").
        """
        return F.embedding(idx, self.E) + self.P[: idx.shape[-1]]

    def forward_from_embeddings(self, X: torch.Tensor) -> torch.Tensor:
        """X^(0) (B, T, d) -> logits Z (B, T, V): the blocks, LN_f and W_U of Section 5.

        Starting from the residual stream rather than token ids lets a caller differentiate
        with respect to X^(0) (gptlib.analysis.causality) or run on the meta device (gptlib.analysis.cost).
        """
        X = self.hook_X[0](self.check_embeddings(X))  # X^(0)
        for l, block in enumerate(self.blocks):
            X = self.hook_X[l + 1](block(X))  # X^(l+1), (B, T, d)
        return self.hook_Z(self.ln_f(X) @ self.unembedding)  # Z = LN_f(X^(L)) W_U, (B, T, V)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        """idx (B, T) or (T,) -> logits (B, T, V) or (T, V); with targets, (logits, mean cross-entropy)."""
        idx = self.check_tokens(idx)
        if targets is not None:
            targets = self.check_tokens(targets, name="targets")
            if targets.shape != idx.shape:
                raise ValueError(f"targets must have the shape of idx {tuple(idx.shape)}, got {tuple(targets.shape)}")
        squeeze = idx.dim() == 1
        if squeeze:
            idx = idx.unsqueeze(0)
            targets = None if targets is None else targets.unsqueeze(0)
        Z = self.forward_from_embeddings(self.embed(idx))  # (B, T, V)
        if squeeze:
            Z = Z.squeeze(0)
        if targets is None:
            return Z
        return Z, next_token_loss(Z, targets)


@contextlib.contextmanager
def attention_matrices_formed(module: nn.Module, formed: bool = True):
    """For the duration, every MultiHeadAttention in `module` (a GPT, a block or one attention) forms
    each A^h = softmax(S^h + M) and multiplies it into the values (formed=True), or calls the fused
    kernel (formed=False), whatever it did before; each is handed back its own setting afterwards,
    also when the body raises. The two forms give the same MHA(X) up to rounding (tests/test_model.py).
    """
    if not isinstance(module, nn.Module):
        raise ValueError(f"module must be a torch nn.Module, got {type(module).__name__}")
    formed = validation.boolean("formed", formed)
    attentions = [m for m in module.modules() if isinstance(m, MultiHeadAttention)]
    before = [attn.forms_A for attn in attentions]
    for attn in attentions:
        attn.forms_A = formed
    try:
        yield module
    finally:
        for attn, setting in zip(attentions, before):
            attn.forms_A = setting


@contextlib.contextmanager
def eval_mode(model):
    """Run a model for measurement: no_grad for the duration and, for an nn.Module, eval mode
    (so dropout, were there any, cannot change what is measured), its train/eval mode handed
    back afterwards, also when the body raises. Anything else callable is only run under no_grad."""
    module = model if isinstance(model, nn.Module) else None
    training = module is not None and module.training
    if module is not None:
        module.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        if module is not None:
            module.train(training)
