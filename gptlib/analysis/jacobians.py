"""Block Jacobians of the residual stream (Lecture 5, Section 3; Remark 3.3; Exercise 7).

A block maps one sequence X (T, d) to X' (T, d); its Jacobian is the (T d) x (T d) matrix
J[i, j] = d vec(X')_i / d vec(X)_j, with vec flattening row by row (position-major). The
Jacobian of the stack from X^(0) to X^(L) is the product J_{L-1} ... J_1 J_0 of block
Jacobians, each taken at that block's own input.

Pre-norm blocks (Definition 3.1) have the form X' = X + F(X) with F(X) = MHA(LN_1(X)) +
MLP(LN_2(Y)), so J = I + DF. Post-norm blocks (Aside 3.5) end in a LayerNorm and have no
identity term. Remark 3.3's contrast, the same sublayers with no residual addition at all,
is without_residual(block). The model's own modules are used throughout; nothing here re-implements them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import validation
from ..config import GPTConfig
from ..data import encode
from ..model import GPT, AttentionOnlyBlock, Block, attention_matrices_formed, next_token_loss
from ..reproducibility import seeded
from .cache import reads_model, recording, run_with_cache


def jacobian_of(fn, X: torch.Tensor) -> torch.Tensor:
    """Jacobian of a map (B, T, d) -> (B, T, d) at X (T, d), as a (T d, T d) matrix, by reverse mode.

    Like finite_difference_jacobian it runs T d copies of X as one batch (fn must treat the
    sequences of a batch independently, as every block does): copy j back-propagates output j
    alone, so one plain backward pass gives all T d rows. No vmap and no grad_outputs tensor,
    which would import torch._dynamo (torch.func.jacrev) or sympy (is_grads_batched): seconds
    of a notebook's time.
    """
    T, d = X.shape
    copies = X.detach().reshape(1, T * d).expand(T * d, -1).clone().requires_grad_(True)  # (T d, T d): row j is vec(X)
    outputs = fn(copies.reshape(T * d, T, d)).reshape(T * d, T * d)  # row j: vec(fn(X)) from copy j
    (jacobian,) = torch.autograd.grad(outputs.diagonal().sum(), copies)  # row j: d vec(fn(X))_j / d vec(X)
    return jacobian


def finite_difference_jacobian(fn, X: torch.Tensor, h: float = 1e-6) -> torch.Tensor:
    """Jacobian of a map (B, T, d) -> (B, T, d) at X (T, d) by central differences, without autograd.

    Column j is (fn(X + h e_j) - fn(X - h e_j)) / 2h, all 2 T d shifted copies in one batch; a
    (T d, T d) matrix, vec row by row. In float64 its error is far below 1e-6 for gptlib's blocks.
    """
    h = validation.real("h", h, above=0)  # h = 0 divides 0 by 0
    T, d = X.shape
    shifts = h * torch.eye(T * d, dtype=X.dtype).reshape(T * d, T, d)  # (T d, T, d): h e_j as a sequence
    with torch.no_grad():
        difference = fn(X + shifts) - fn(X - shifts)  # (T d, T, d): column j in row j
    return (difference / (2 * h)).reshape(T * d, T * d).T


def _formed(module, X: torch.Tensor) -> torch.Tensor:
    """module(X) with every attention in it forming A^h (the form autograd's forward mode can follow)."""
    with attention_matrices_formed(module):
        return module(X)


def branch_by_definition(block: Block):
    """F of Definition 3.1 composed from a pre-norm block's own sublayers, not from its forward:
    X -> MHA(LN_1(X)) + MLP(LN_2(X + MHA(LN_1(X)))), (B, T, d) -> (B, T, d)."""
    if not isinstance(block, Block):
        raise ValueError("branch_by_definition needs a pre-norm block with an MLP: Definition 3.1")

    def F(X):
        attn_write = _formed(block.attn, block.ln_1(X))
        return attn_write + block.mlp(block.ln_2(X + attn_write))

    return F


def _block_map(block: Block):
    """X -> block(X) with every A^h formed, (B, T, d) -> (B, T, d)."""
    return lambda Z: _formed(block, Z)


def block_jacobian(block: Block, X: torch.Tensor) -> torch.Tensor:
    """d vec(block(X)) / d vec(X) at one sequence X (T, d): a (T d, T d) matrix."""
    X = validation.sequence(X, block.ln_1.gamma.shape[0])
    return jacobian_of(_block_map(block), X)


def residual_branch(block: Block, X: torch.Tensor) -> torch.Tensor:
    """F(X) = MHA(LN_1(X)) + MLP(LN_2(Y)) of a pre-norm block, from the block's own recorded writes.

    X (B, T, d) -> (B, T, d). Post-norm blocks are refused: they are not of the form X + F(X).
    """
    if not isinstance(block, (Block, AttentionOnlyBlock)):
        raise ValueError("residual_branch needs a pre-norm block: a post-norm block is LN(X + F(X)), not X + F(X)")
    with recording(block, {}) as written:
        _formed(block, X)
    if isinstance(block, AttentionOnlyBlock):
        return written["attn_write"]
    return written["attn_write"] + written["mlp_write"]


def branch_jacobian(block: Block, X: torch.Tensor) -> torch.Tensor:
    """DF at X (T, d) for a pre-norm block, (T d, T d); Definition 3.1 says block_jacobian = I + DF."""
    X = validation.sequence(X, block.ln_1.gamma.shape[0])
    return jacobian_of(lambda Z: residual_branch(block, Z), X)


def without_residual(block: Block):
    """Remark 3.3's contrast: a pre-norm block's own sublayers with both residual additions removed,
    X -> MLP(LN_2(MHA(LN_1(X)))), (B, T, d) -> (B, T, d). Its Jacobian has no identity term."""
    if not isinstance(block, Block):
        raise ValueError("without_residual needs a pre-norm block with an MLP: X -> MLP(LN_2(MHA(LN_1(X))))")
    return lambda X: block.mlp(block.ln_2(_formed(block.attn, block.ln_1(X))))


def stack_jacobians(blocks, X0: torch.Tensor, residual: bool = True) -> list[torch.Tensor]:
    """The block Jacobians J_0, ..., J_{L-1}, each at its own input X^(l), starting from X0 (T, d).

    residual=False stacks without_residual(block) instead: X^(l+1) = MLP(LN_2(MHA(LN_1(X^(l))))).
    Every step keeps the shape (T, d), so X0 is the one input checked.
    """
    X0 = validation.sequence(X0, blocks[0].ln_1.gamma.shape[0])
    jacobians, X = [], X0
    for block in blocks:
        step = _block_map(block) if residual else without_residual(block)
        jacobians.append(jacobian_of(step, X))
        X = step(X.unsqueeze(0)).squeeze(0).detach()  # X^(l+1), (T, d)
    return jacobians


def product_of_jacobians(jacobians: list[torch.Tensor]) -> torch.Tensor:
    """J_{L-1} ... J_1 J_0 (chain rule, Remark 3.3): d vec(X^(L)) / d vec(X^(0))."""
    product = torch.eye(jacobians[0].shape[0], dtype=jacobians[0].dtype)
    for J in jacobians:
        product = J @ product
    return product


@reads_model
def layer_gradient_norms(model: GPT, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """||d loss / d X^(l)|| for l = 0..L (Frobenius over positions and features): shape (L + 1,).

    loss is the mean next-token cross-entropy of Section 5; the gradient reaching X^(l) is
    what flows back to block l-1 and to the embeddings for l = 0.
    """
    Z, cache = run_with_cache(model, idx)
    loss = next_token_loss(Z, targets)
    streams = [cache.X(l) for l in range(model.config.L + 1)]
    grads = torch.autograd.grad(loss, streams)
    return torch.stack([torch.linalg.vector_norm(g) for g in grads]).detach()


def _study_inputs(text: str, T: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The first T characters of `text` and their next characters, (T,) each."""
    if len(text) < T + 1:
        raise ValueError(f"text must have at least T + 1 = {T + 1} characters (inputs and next-character targets)")
    tokens = encode(text[: T + 1])
    return tokens[:-1], tokens[1:]


def _seeded_model(seed: int, **sizes) -> GPT:
    with seeded(seed):
        return GPT(GPTConfig(**sizes)).double()


def _end_to_end_spectrum(model: GPT, idx: torch.Tensor, residual: bool = True) -> torch.Tensor:
    """Singular values (T d,), descending, of d X^(L) / d X^(0) at X^(0) the embedding of idx (T,).

    residual=False: the model's blocks without their residual additions (stack_jacobians).
    """
    with torch.no_grad():
        X0 = model.embed(idx)  # X^(0), (T, d)
    product = product_of_jacobians(stack_jacobians(model.blocks, X0, residual))  # (T d, T d)
    return torch.linalg.svdvals(product).detach()


@dataclass(frozen=True)
class DepthStudyRow:
    """Exercise 7 at one depth L: the spectrum of d X^(L) / d X^(0) and the gradient reaching each layer."""

    L: int
    singular_values: torch.Tensor  # (T d,), descending
    gradient_norms: torch.Tensor  # (L + 1,): ||d loss / d X^(l)||, l = 0..L


def depth_study(
    norm: str, depths, d: int = 32, T: int = 4, H: int = 4, seed: int = 0, text: str = "To be, or"
) -> list[DepthStudyRow]:
    """Exercise 7 at initialization: for each depth L, a fresh float64 model with the given norm placement.

    d X^(L) / d X^(0) is the (T d) x (T d) product of the block Jacobians. The tokens are
    the first T characters of `text`, predicting the next character. The model is seeded with
    `seed` for every L, so each row is reproducible on its own; the global random generator is
    left as it was.
    """
    idx, targets = _study_inputs(text, T)  # (T,), (T,)
    rows = []
    for L in depths:
        model = _seeded_model(seed, T_max=T, d=d, H=H, L=L, norm=norm)
        rows.append(DepthStudyRow(L, _end_to_end_spectrum(model, idx), layer_gradient_norms(model, idx, targets)))
    return rows


@dataclass(frozen=True)
class ResidualContrastRow:
    """Remark 3.3 at one depth L: singular values (descending) of d X^(L) / d X^(0), with and without I."""

    L: int
    residual: torch.Tensor  # (T d,): the model's blocks, each factor I + DF_l
    plain: torch.Tensor  # (T d,): X^(l+1) = MLP(LN_2(MHA(LN_1(X^(l))))), each factor DF_l alone


def residual_contrast(
    depths, d: int = 32, T: int = 4, H: int = 4, init_std: float = 0.02, seed: int = 0, text: str = "To be, or"
) -> list[ResidualContrastRow]:
    """Remark 3.3 over depth: the same pre-norm blocks stacked with and without their residual additions.

    For each L a fresh float64 pre-norm model (seeded with `seed`, weights of std `init_std`),
    at X^(0) the embedding of the first T characters of `text`. The global random generator
    is left as it was.
    """
    idx, _ = _study_inputs(text, T)
    rows = []
    for L in depths:
        model = _seeded_model(seed, T_max=T, d=d, H=H, L=L, init_std=init_std)
        rows.append(ResidualContrastRow(L, _end_to_end_spectrum(model, idx), _end_to_end_spectrum(model, idx, residual=False)))
    return rows
