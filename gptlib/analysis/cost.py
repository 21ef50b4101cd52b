"""Section 6 (computational cost): leading FLOP counts, FlopCounterMode measurements, the 6N rule.

Convention: one multiply-add is 2 FLOPs, so a (m x k) @ (k x n) product costs 2mkn; this is
also what torch.utils.flop_counter.FlopCounterMode counts. Only matrix products are counted:
softmax, GELU, LayerNorm, bias and residual additions, the causal mask, the embedding lookup
and the cross-entropy are O(T d) or O(T^2) elementwise work that both we and FlopCounterMode
leave out. The attention products are counted in full (T x T), as FlopCounterMode does; a
kernel that skips the masked upper triangle does about half of that work.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from .. import validation
from ..config import GPTConfig
from ..model import GPT, MultiHeadAttention, attention_matrices_formed
from .cache import reads_model
from .counting import theorem_5_2

MULTIPLY_ADD_FLOPS = 2

# The rows of forward_costs, named as the lecture's table names them (notebooks print these names).
PROJECTIONS = "query, key, value and output projections"
ATTENTION = "attention scores and value aggregation"
MLPS = "MLP sublayers"
UNEMBEDDING = "unembedding"


def _check_sizes(T: int, B: int) -> tuple[int, int]:
    return validation.integer("T", T, at_least=1), validation.integer("B", B, at_least=1)


def forward_costs(config: GPTConfig, T: int, B: int = 1) -> dict[str, int]:
    """Section 6's table: forward-pass FLOPs of each component on B sequences of length T.

    Per block, with d_head = d/H summed over the H heads:
      Q, K, V projections 3 * 2Td^2 and output projection 2Td^2   -> O(L T d^2)
      scores Q K^T 2T^2 d and aggregation A V 2T^2 d               -> O(L T^2 d)
      MLP W_1 and W_2, 2 * 2 T d d_ff = 16 T d^2 for d_ff = 4d     -> O(L T d^2)
    plus the unembedding 2TdV once (outside the lecture's table, but a real matmul).
    """
    T, B = _check_sizes(T, B)
    L, d, d_ff, V = config.L, config.d, config.d_ff, config.V
    tokens = B * T
    mlp = 0 if config.attn_only else 2 * MULTIPLY_ADD_FLOPS * tokens * d * d_ff
    return {
        PROJECTIONS: L * 4 * MULTIPLY_ADD_FLOPS * tokens * d * d,
        ATTENTION: L * 2 * MULTIPLY_ADD_FLOPS * B * T * T * d,
        MLPS: L * mlp,
        UNEMBEDDING: MULTIPLY_ADD_FLOPS * tokens * d * V,
    }


def forward_flops(config: GPTConfig, T: int, B: int = 1) -> int:
    """Total forward matmul FLOPs: L(8Td^2 + 4Td d_ff + 4T^2 d) + 2TdV per sequence."""
    return sum(forward_costs(config, T, B).values())


def training_flops(config: GPTConfig, T: int, B: int = 1) -> int:
    """Forward plus backward: every product Y = X W needs dX = dY W^T and dW = X^T dY, so 3x forward."""
    return 3 * forward_flops(config, T, B)


def crossover_T(config: GPTConfig) -> int:
    """The T where scores + aggregation (4 T^2 d per block) equal projections + MLP (8Td^2 + 4Td d_ff).

    4T^2 d = 8Td^2 + 4Td d_ff  <=>  T = 2d + d_ff, which is 6d for d_ff = 4d. Beyond it the
    O(L T^2 d) term of Section 6 is the larger one.
    """
    if config.attn_only:
        raise ValueError("crossover_T needs MLP sublayers: an attention-only config has no d_ff work")
    return 2 * config.d + config.d_ff


def measured_flops(
    config: GPTConfig,
    T: int,
    B: int = 1,
    *,
    training: bool = False,
    fused: bool = False,
    device: str = "meta",
) -> int:
    """FLOPs that FlopCounterMode sees for one forward (or forward + backward) pass from X^(0).

    On the meta device nothing is computed, so any size takes the same fraction of a second (about
    0.2 s for a training step of the course model: each op still goes through Python). `fused`
    selects the model's scaled_dot_product_attention path; on a real CPU its kernel is one
    FlopCounterMode has no formula for, so those FLOPs go uncounted.
    """
    T, B = _check_sizes(T, B)
    with torch.device(device):
        model = GPT(config.replace(T_max=max(T, config.T_max)))
    X0 = torch.randn(B, T, config.d, device=device, requires_grad=training)  # X^(0), (B, T, d)
    counter = FlopCounterMode(display=False)
    with counter, attention_matrices_formed(model, formed=not fused):
        Z = model.forward_from_embeddings(X0)  # (B, T, V)
        if training:
            targets = torch.zeros(B * T, dtype=torch.long, device=device)
            F.cross_entropy(Z.reshape(B * T, config.V), targets).backward()
    return counter.get_total_flops()


def measured_score_and_aggregate_flops(config: GPTConfig, T: int, B: int = 1) -> int:
    """FlopCounterMode's count of softmax(Q K^T / sqrt(d_head)) V alone, over all L blocks (meta device)."""
    T, B = _check_sizes(T, B)
    with torch.device("meta"):
        attn = MultiHeadAttention(config)
        q, k, v = (torch.empty(B, config.H, T, config.d_head) for _ in range(3))  # each (B, H, T, d_head)
    counter = FlopCounterMode(display=False)
    with counter:
        attn.attention_matrices(q, k) @ v  # (B, H, T, d_head)
    return config.L * counter.get_total_flops()


def embedding_parameters(config: GPTConfig) -> int:
    """Entries of the token and positional tables E (V, d) and P (T_max, d): (V + T_max) d."""
    return (config.V + config.T_max) * config.d


def non_embedding_parameters(config: GPTConfig) -> int:
    """N of Rule-of-thumb 6.1: Theorem 5.2's count without the token and positional tables E, P."""
    return theorem_5_2(config) - embedding_parameters(config)


def six_n_rule(config: GPTConfig, tokens: int) -> int:
    """Rule-of-thumb 6.1: training FLOPs ~ 6 N tokens.

    Exercise 8: a weight w used once per token costs one multiply-add (2 FLOPs) forward,
    and two backward (one for the input's gradient, one for w's), so 6 FLOPs per weight per
    token. Attention's scores and aggregation use no weights, so the rule misses their
    3 * 4 T d per token per block; biases and LayerNorm parameters it counts but they do
    no matmul work.
    """
    return 6 * non_embedding_parameters(config) * tokens


def six_n_rule_error(config: GPTConfig, T: int) -> float:
    """Relative error of the 6N rule against the exact FLOPs of a training step at length T.

    The exact count is training_flops, Section 6's closed form, which equals FlopCounterMode's
    count to the FLOP (tests/analysis/test_cost.py measures both); the closed form is instant where a
    measurement on the meta device takes about 0.2 s.
    """
    return training_flops(config, T) / six_n_rule(config, T) - 1


@dataclass(frozen=True)
class TokenTimes:
    """Seconds per token of the fused no-grad forward at each T: the median over rounds, and the fastest and
    slowest round (their spread is the noise of the machine the run shared)."""

    T: tuple[int, ...]
    median: tuple[float, ...]
    fastest: tuple[float, ...]
    slowest: tuple[float, ...]


@reads_model
def seconds_per_token(model: GPT, T_values, tokens: int = 1024, rounds: int = 7) -> TokenTimes:
    """Wall time per token of one no-grad forward (the fused path) on `tokens` tokens, as tokens // T sequences of
    length T, for every T in T_values. Every T is called once to warm up, then timed once per round, the T values
    interleaved within a round, so that a burst of other work on the machine falls on all of them alike."""
    if isinstance(T_values, (str, bytes)) or not hasattr(T_values, "__iter__"):
        raise ValueError(f"T_values must be a sequence of lengths T, got {T_values!r}")
    T_values = tuple(validation.integer("T", T, at_least=1, at_most=model.config.T_max) for T in T_values)
    if not T_values:
        raise ValueError("T_values must hold at least one length T, got none")
    tokens = validation.integer("tokens", tokens, at_least=max(T_values))
    rounds = validation.integer("rounds", rounds, at_least=1)
    batches = {T: torch.randint(0, model.config.V, (tokens // T, T)) for T in T_values}
    times: dict[int, list[float]] = {T: [] for T in T_values}
    with torch.no_grad():
        for idx in batches.values():
            model(idx)  # warm-up
        for _ in range(rounds):
            for T, idx in batches.items():
                start = time.perf_counter()
                model(idx)
                times[T].append((time.perf_counter() - start) / idx.numel())
    return TokenTimes(T_values, tuple(statistics.median(times[T]) for T in T_values),
                      tuple(min(times[T]) for T in T_values), tuple(max(times[T]) for T in T_values))
