"""Induction heads in a two-layer attention-only GPT: the task, the head scores, the circuits.

Beyond the lecture (its Section 1 gives the heads; this module measures what trained ones do):
- the task: random tokens repeated, so a repeat is predictable only by looking back
  at what followed the current token's earlier occurrence;
- previous-token score of a head: mean attention A[t, t-1];
- induction score of a head: on a sequence of n random tokens repeated twice, mean
  attention from position t of the second copy to t - n + 1, the token after the previous
  occurrence of x_t;
- the full OV circuit E W_V^h W_O^h W_U (V, V) of a head (LayerNorms left out): a copying
  head maps each token's embedding to a boost of that same token's logit, which shows as
  eigenvalues with positive real part (among its at most d_head nonzero ones) and a
  copying score Re(sum lambda) / sum |lambda| near 1;
- K-composition between a layer-0 head a and a layer-1 head b: how much of the key side
  of b's W_QK = W_Q^b W_K^b^T reads what head a writes, || W_QK^b (W_OV^a)^T ||_F /
  (||W_QK^b||_F ||W_OV^a||_F) with W_OV^a = W_V^a W_O^a (rows convention: x W_V W_O).
"""

from __future__ import annotations

import torch

from .. import validation
from ..config import GPTConfig
from ..model import GPT
from .attention import W_OV, W_QK
from .cache import reads_model, run_with_cache

INDUCTION_CONFIG = GPTConfig(V=65, T_max=64, d=64, H=4, L=2, attn_only=True)
"""The two-layer attention-only model of the induction task (vocabulary: the course's 65 characters)."""

INDUCTION_EVAL_SEED = 1234  # generator seed of the fixed evaluation batch, distinct from training's
INDUCTION_EVAL_SEQUENCES = 256  # rows of the fixed evaluation batch


def repeated_random_tokens(B: int, n: int, V: int, generator: torch.Generator) -> torch.Tensor:
    """B sequences of n uniform random token ids followed by the same n again: (B, 2n)."""
    B, V = validation.integer("B", B, at_least=1), validation.integer("V", V, at_least=1)
    if validation.integer("n", n) < 2:
        raise ValueError(f"need n >= 2 tokens to repeat, got n={n}")
    first = torch.randint(V, (B, n), generator=generator)  # (B, n)
    return torch.cat([first, first], dim=1)  # (B, 2n)


def induction_eval_tokens(config: GPTConfig = INDUCTION_CONFIG) -> torch.Tensor:
    """The fixed evaluation batch of the induction task: 256 rows of T_max // 2 random tokens said
    twice, (256, 64) for INDUCTION_CONFIG."""
    n = config.T_max // 2
    return repeated_random_tokens(INDUCTION_EVAL_SEQUENCES, n, config.V, torch.Generator().manual_seed(INDUCTION_EVAL_SEED))


def training_batch(B: int, T: int, V: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and targets (B, T) for training: row b repeats a random segment of n_b tokens periodically.

    n_b is uniform in [4, T // 2], so 'look a fixed distance back' is useless: only an induction
    circuit (find the earlier occurrence of the current token, copy its successor) predicts
    every repeat. Periodic rows make most positions predictable, a strong training signal.
    """
    B, V = validation.integer("B", B, at_least=1), validation.integer("V", V, at_least=1)
    if validation.integer("T", T) < 8:
        raise ValueError(f"need T >= 8 for repeated segments of length >= 4, got T={T}")
    segments = torch.randint(V, (B, T // 2), generator=generator)  # (B, T // 2)
    lengths = torch.randint(4, T // 2 + 1, (B,), generator=generator)  # (B,)
    positions = torch.arange(T + 1)  # (T + 1,)
    tokens = segments.gather(1, positions % lengths[:, None])  # (B, T + 1): token t is segment[t mod n_b]
    return tokens[:, :-1], tokens[:, 1:]


def _copy_length(model: GPT, tokens: torch.Tensor) -> int:
    """n for token ids (B, 2n) whose rows are n >= 2 tokens said twice (repeated_random_tokens);
    ValueError otherwise, since the induction measures read the second copy against the first."""
    tokens = validation.token_ids(tokens, model.config.V, dims=(2,), name="tokens")  # the model checks T itself
    B, T = tokens.shape
    n = T // 2
    if T % 2 or n < 2 or not torch.equal(tokens[:, :n], tokens[:, n:]):
        raise ValueError(f"tokens must be (B, 2n) rows of n >= 2 tokens said twice (repeated_random_tokens), "
                         f"got shape {(B, T)}" + ("" if T % 2 or n < 2 else " whose halves differ"))
    return n


@reads_model
@torch.no_grad()
def half_losses(model: GPT, tokens: torch.Tensor) -> tuple[float, float]:
    """Mean next-token loss on the first and on the second copy of repeated sequences (B, 2n).

    The first copy is unpredictable (about ln V); position n-1 onward predicts tokens of the
    second copy. Loss at position t is for target x_{t+1}, so the first half is t < n-1.
    """
    n = _copy_length(model, tokens)
    logits = model(tokens[:, :-1])  # (B, 2n-1, V)
    losses = torch.nn.functional.cross_entropy(logits.transpose(1, 2), tokens[:, 1:], reduction="none")  # (B, 2n-1)
    return losses[:, : n - 1].mean().item(), losses[:, n - 1 :].mean().item()


def previous_token_scores(A: torch.Tensor) -> torch.Tensor:
    """Previous-token score (H,) of each head: the mean of A^h[t, t-1] over t >= 1 and over any
    leading (batch) dimensions of the attention patterns A, shape (..., H, T, T)."""
    if A.dim() < 3 or A.shape[-1] != A.shape[-2] or A.shape[-1] < 2:
        raise ValueError(f"need attention patterns of shape (..., H, T, T) with T >= 2, got {tuple(A.shape)}")
    previous = A.diagonal(offset=-1, dim1=-2, dim2=-1)  # (..., H, T-1): A^h[t, t-1] for t = 1..T-1
    return previous.mean(dim=(*range(previous.dim() - 2), -1))  # (H,)


@reads_model
@torch.no_grad()
def head_scores(model: GPT, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Previous-token and induction scores (L, H) of every head on repeated sequences (B, 2n).

    previous[l, h] = mean over t >= 1 of A^h[t, t-1]; induction[l, h] = mean over t in the
    second copy (t >= n) of A^h[t, t - n + 1].
    """
    n = _copy_length(model, tokens)
    _, cache = run_with_cache(model, tokens)
    previous, induction = [], []
    for l in range(model.config.L):
        A = cache.A(l)  # (B, H, 2n, 2n)
        previous.append(previous_token_scores(A))  # (H,)
        induction.append(A.diagonal(offset=-(n - 1), dim1=-2, dim2=-1)[..., 1:].mean(dim=(0, 2)))  # t = n..2n-1
    return torch.stack(previous), torch.stack(induction)


@reads_model
@torch.no_grad()
def full_ov_eigenvalues(model: GPT, layer: int, head: int) -> torch.Tensor:
    """Eigenvalues (V,) complex of E W_OV^h W_U, the token-to-logit map of a head (LayerNorms left out).

    The matrix has rank at most d_head, so at most d_head eigenvalues are nonzero; the rest
    are zero up to rounding, with arbitrary signs.
    """
    layer = validation.integer("layer", layer, at_least=0, at_most=model.config.L - 1)
    circuit = model.E @ W_OV(model.blocks[layer].attn, head) @ model.unembedding  # (V, V)
    return torch.linalg.eigvals(circuit.double())


def significant(eigenvalues: torch.Tensor, rtol: float = 1e-3) -> torch.Tensor:
    """The eigenvalues with |lambda| > rtol * max |lambda| (drops the rounding-level zeros of a low-rank map)."""
    rtol = validation.real("rtol", rtol, at_least=0)  # NaN would keep none
    magnitudes = eigenvalues.abs()
    return eigenvalues[magnitudes > rtol * magnitudes.max()]


def positive_eigenvalue_fraction(eigenvalues: torch.Tensor, rtol: float = 1e-3) -> float:
    """Share of the significant eigenvalues with positive real part: near 1 for a head that copies tokens."""
    return (significant(eigenvalues, rtol).real > 0).double().mean().item()


def copying_score(eigenvalues: torch.Tensor) -> float:
    """Re(sum lambda) / sum |lambda| in [-1, 1]: +1 when every eigenvalue is positive real, -1 when negative."""
    return (eigenvalues.sum().real / eigenvalues.abs().sum()).item()


@reads_model
@torch.no_grad()
def k_composition(model: GPT, reader_layer: int = 1, writer_layer: int = 0) -> torch.Tensor:
    """K-composition scores (H_reader, H_writer): ||W_QK^b (W_OV^a)^T||_F / (||W_QK^b||_F ||W_OV^a||_F)."""
    writer_layer, reader_layer = (validation.integer(name, layer) for name, layer in
                                  (("writer_layer", writer_layer), ("reader_layer", reader_layer)))
    if not 0 <= writer_layer < reader_layer < model.config.L:
        raise ValueError(f"need 0 <= writer_layer < reader_layer < L={model.config.L}, "
                         f"got writer {writer_layer}, reader {reader_layer}")
    H, reader, writer = model.config.H, model.blocks[reader_layer].attn, model.blocks[writer_layer].attn
    scores = torch.empty(H, H)
    for b in range(H):
        qk = W_QK(reader, b)  # (d, d)
        for a in range(H):
            ov = W_OV(writer, a)  # (d, d)
            norms = torch.linalg.matrix_norm(qk) * torch.linalg.matrix_norm(ov)
            scores[b, a] = torch.linalg.matrix_norm(qk @ ov.T) / norms
    return scores
