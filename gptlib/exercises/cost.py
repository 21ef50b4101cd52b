"""Exercise 8: training FLOPs per token, and where attention's T^2 work overturns the 6N rule.

    check_training_flops(fn)        fn(config, T) -> FLOPs per token of one training step
                                    (forward + backward) on sequences of length T, compared with
                                    torch's FlopCounterMode on gptlib's GPT (meta device: instant)
    check_attention_takeover(fn)    fn(config) -> the T at which attention's scores and aggregation
                                    cost as much as the projections and the MLP together, checked
                                    against FlopCounterMode at the T it returns

Conventions as in gptlib.analysis.cost: one multiply-add = 2 FLOPs; only matrix products count (what
FlopCounterMode counts); the attention products are counted in full T x T.
"""

from __future__ import annotations

import functools

from ..analysis import cost, counting
from ..analysis.cost import ATTENTION, MLPS, PROJECTIONS, UNEMBEDDING
from ..checking.mistakes import Mistake, close, name_mistake
from ..checking.reading import as_float
from ..checking.running import Wrong, call, checker
from ..checking.variants import variant_points
from ..config import COURSE_CONFIG, GPTConfig

EX8 = "Exercise 8"
RTOL = 1e-9  # FLOP counts are whole numbers: the tolerance only spares a float's rounding

FLOP_POINTS = (
    (COURSE_CONFIG, 64),
    (COURSE_CONFIG, 1024),
    (GPTConfig(V=50, T_max=64, d=64, H=4, L=2, d_ff=128), 16),
    (GPTConfig(V=300, T_max=32, d=48, H=3, L=5), 1),
)


def small_config(rng) -> GPTConfig:
    H = rng.choice((1, 2, 4))
    return GPTConfig(V=rng.randint(10, 300), T_max=64, d=H * rng.randint(2, 12), H=H, L=rng.randint(1, 3),
                     d_ff=rng.randint(8, 160))


def _other_flop_points(rng) -> list[tuple[GPTConfig, int]]:
    """Four (config, T) points for a hidden variant, the first two one config at two lengths (as FLOP_POINTS)."""
    first = small_config(rng)
    short = rng.randint(1, 31)
    return [(first, short), (first, rng.randint(short + 1, 64))] + [(small_config(rng), rng.randint(1, 64)) for _ in range(2)]



@functools.cache
def measured_per_token(config: GPTConfig, T: int) -> int:
    """FlopCounterMode's count of one training step on one sequence of length T, per token."""
    total = cost.measured_flops(config, T, training=True)
    assert total % T == 0, "every counted product is linear in the number of tokens"
    return total // T


def _per_token(c: GPTConfig, T: int, part: str) -> int:
    """One row of cost.forward_costs (forward FLOPs on a sequence of length T), per token."""
    return cost.forward_costs(c, T)[part] // T


def _truth(c: GPTConfig, T: int) -> int:
    return cost.training_flops(c, T) // T  # per token


# What a typical mistake answers for FLOPs per token, as a function of (config, T).
FLOP_MISTAKES = {
    Mistake("flops-no-attention-terms", "you left out attention's scores and aggregation, the T^2 terms (12 L T d per token)"):
        lambda c, T: _truth(c, T) - 3 * _per_token(c, T, ATTENTION),
    Mistake("flops-6n-rule",
        "that is the 6N rule: it leaves out the T^2 terms, and N's biases and LayerNorm parameters do no matmul work"):
        lambda c, T: 6 * cost.non_embedding_parameters(c),
    Mistake("flops-6n-with-embeddings",
        "that is 6N with the embeddings counted: a lookup in E or P does no multiply-adds, and the T^2 terms are missing"):
        lambda c, T: 6 * counting.theorem_5_2(c),  # N + E, P: every parameter
    Mistake("flops-embeddings-as-matmuls", "you counted the embeddings E and P as matmuls: a table lookup does no multiply-adds"):
        lambda c, T: _truth(c, T) + 6 * cost.embedding_parameters(c),
    Mistake("flops-n-with-biases", "your N includes biases and LayerNorm parameters, which do no matmul work"):
        lambda c, T: 6 * cost.non_embedding_parameters(c) + 3 * _per_token(c, T, ATTENTION),
    Mistake("flops-forward-only",
        "that is the forward pass only: the backward pass costs twice the forward (gradients for inputs and for weights)"):
        lambda c, T: _truth(c, T) / 3,
    Mistake("flops-multiply-add-as-one", "you counted a multiply-add as 1 FLOP: FlopCounterMode (and the 6N rule) count 2"):
        lambda c, T: _truth(c, T) / 2,
    Mistake("flops-halved-for-mask",
        "you halved the attention products for the causal mask: FlopCounterMode counts the full T x T products"):
        lambda c, T: _truth(c, T) - 3 * _per_token(c, T, ATTENTION) / 2,
    Mistake("flops-one-attention-product",
        "you counted one of the two attention products: the scores Q K^T AND the aggregation A V each cost 2 T d per token"):
        lambda c, T: _truth(c, T) - 3 * _per_token(c, T, ATTENTION) / 2,
    Mistake("flops-attention-one-head",
        "you counted attention's products for one head (d_head wide): the H heads together are d wide"):
        lambda c, T: _truth(c, T) - 3 * _per_token(c, T, ATTENTION) * (1 - 1 / c.H),
    Mistake("flops-t-max-for-t", "you used config.T_max for the attention terms: the sequences are T long"):
        lambda c, T: _truth(c, T) + 3 * (_per_token(c, c.T_max, ATTENTION) - _per_token(c, T, ATTENTION)),
    Mistake("flops-backward-once",
        "the backward pass costs twice the forward, not once (gradients for the inputs AND for the weights): 3x forward, not 2x"):
        lambda c, T: 2 * _truth(c, T) / 3,
    Mistake("flops-no-unembedding", "you left out the unembedding W_U (6 d V per token)"):
        lambda c, T: _truth(c, T) - 3 * _per_token(c, T, UNEMBEDDING),
    Mistake("flops-per-sequence", "that is per sequence of T tokens: divide by T"):
        lambda c, T: _truth(c, T) * T,
    Mistake("flops-attention-per-sequence", "your attention term is per sequence (T^2 d), the rest per token: divide it by T"):
        lambda c, T: _truth(c, T) + 3 * _per_token(c, T, ATTENTION) * (T - 1),
    Mistake("flops-d-ff-4d", "you assumed d_ff = 4d: use config.d_ff"):
        lambda c, T: _truth(c.replace(d_ff=4 * c.d), T),
}


@checker(EX8)
def check_training_flops(flops_per_token) -> tuple[str, list[str]]:
    """Exercise 8: flops_per_token(config, T) -> FLOPs per token of a training step (forward and
    backward) on sequences of length T; matmuls only, a multiply-add is 2 FLOPs. Any number
    (int, float, numpy, one-element tensor), derived or measured; the config is a copy."""
    points = variant_points(FLOP_POINTS, _other_flop_points)
    answers = {
        point: as_float(call(flops_per_token, *point, what="config, T"), "your FLOPs per token")
        for point in points
    }
    for c, T in points:
        truth = measured_per_token(c, T)
        if close(answers[(c, T)], truth, rtol=RTOL):
            continue
        details = [f"(d, d_ff, L, V) = ({c.d}, {c.d_ff}, {c.L}, {c.V}), T = {T}: "
                   f"yours {answers[(c, T)]:,.0f}, FlopCounterMode {truth:,}"]
        named = name_mistake(answers, FLOP_MISTAKES, functools.partial(close, rtol=RTOL))
        if not named and close(answers[points[0]], answers[points[1]], rtol=RTOL):
            Ts = (points[0][1], points[1][1])  # one config, two lengths
            named = f"your count is the same for T = {Ts[0]} and T = {Ts[1]}: attention's work per token grows with T"
        raise Wrong((named or "your count differs from FlopCounterMode's") + ".", details, mistake=None)
    return f"equal to FlopCounterMode's count on all {len(points)} (config, T) points.", [
        f"course config: T = 64 -> {measured_per_token(COURSE_CONFIG, 64):,} per token, "
        f"T = 1024 -> {measured_per_token(COURSE_CONFIG, 1024):,}"
    ]


TAKEOVER_CONFIGS = (COURSE_CONFIG, GPTConfig(d=64, H=4, d_ff=128), GPTConfig(d=48, H=3, L=2, d_ff=300))

TAKEOVER_MISTAKES = {
    Mistake("takeover-d-ff-4d",
        "you assumed d_ff = 4d (T = 6d): the MLP's work is 4 T d d_ff per block, use config.d_ff"): lambda c: 6 * c.d,
    Mistake("takeover-no-mlp",
        "you left out the MLP: its work (4 T d d_ff per block) counts on the parameter side too"): lambda c: 2 * c.d,
    Mistake("takeover-one-attention-product",
        "you counted one attention product: the scores Q K^T AND the aggregation A V each cost 2 T^2 d"):
        lambda c: 2 * (2 * c.d + c.d_ff),
    Mistake("takeover-halved-for-mask",
        "you halved the attention products for the causal mask: FlopCounterMode counts the full T x T products"):
        lambda c: 2 * (2 * c.d + c.d_ff),
    Mistake("takeover-attention-one-head",
        "you counted attention for one head (T^2 d_head): the H heads together do 4 T^2 d per block"):
        lambda c: c.H * (2 * c.d + c.d_ff),
    Mistake("takeover-unembedding-counted",
        "you counted the unembedding W_U with the projections: the question compares the blocks' work only"):
        lambda c: 2 * c.d + c.d_ff + c.V / (2 * c.L),
    Mistake("takeover-attention-twice", "you counted the attention products twice"): lambda c: (2 * c.d + c.d_ff) // 2,
    Mistake("takeover-t-equals-d",
        "T = d is where one score row costs as much as one projection row; compare whole blocks"): lambda c: c.d,
}


@functools.lru_cache(maxsize=256)
def measured_split(config: GPTConfig, T: int) -> tuple[int, int]:
    """FlopCounterMode's forward FLOPs at length T: (scores + aggregation, projections + MLPs)."""
    attention = cost.measured_score_and_aggregate_flops(config, T)
    total = cost.measured_flops(config, T)
    return attention, total - attention - cost.forward_costs(config, T)[UNEMBEDDING]


@functools.lru_cache(maxsize=64)
def measured_crossing(config: GPTConfig) -> int | None:
    """The reference answer: the T at which FlopCounterMode counts attention's products equal to the rest,
    or None where it does not at the candidate (then each answer is measured at its own T). The candidate
    comes from Section 6's table (cost.forward_costs at T = 1: attention's products grow as T^2, the
    projections and MLPs as T); FlopCounterMode decides. Measured once per config (a hidden variant's
    too), not per learner: the learner's T only selects a comparison."""
    costs = cost.forward_costs(config, 1)
    T = max(1, (costs[PROJECTIONS] + costs[MLPS]) // costs[ATTENTION])
    attention, rest = measured_split(config, T)
    return T if attention == rest else None


def _whole(T: float) -> int | None:
    """T as an int when it is a whole number (up to a float's rounding, as np.roots gives), else None."""
    return round(T) if close(T, round(T), rtol=RTOL) else None


@checker(EX8)
def check_attention_takeover(takeover_T) -> tuple[str, list[str]]:
    """Exercise 8: takeover_T(config) -> the sequence length T at which attention's scores and
    aggregation (the T^2 terms) cost as much as all projections and MLPs of the blocks. Beyond it
    the 6N rule, which sees only the latter, misses more than half of the work. Any number that is
    a whole length (a float from a numerical root included); the config is a copy."""
    configs = variant_points(TAKEOVER_CONFIGS, lambda rng: [small_config(rng) for _ in range(3)])
    answers = {c: as_float(call(takeover_T, c, what="config"), "your T") for c in configs}
    for c in configs:
        T = _whole(answers[c])
        if T is not None and T >= 1:
            if T == measured_crossing(c):
                continue
            attention, rest = measured_split(c, T)
            if attention == rest:
                continue
            details = [f"(d, d_ff) = ({c.d}, {c.d_ff}), your T = {T}: "
                       f"FlopCounterMode counts attention {attention:,}, the rest {rest:,}"]
        else:
            details = [f"(d, d_ff) = ({c.d}, {c.d_ff}): your T = {answers[c]:g}"]
        named = name_mistake(answers, TAKEOVER_MISTAKES, functools.partial(close, rtol=RTOL))
        if named:
            raise Wrong(named + ".", details, mistake=None)
        if T is None or T < 1:
            raise Wrong(f"T must be a positive whole length, got {answers[c]:g}", details, mistake="crossover-t-not-a-length")
        side = "below" if attention < rest else "beyond"
        raise Wrong(f"your T is {side} the crossing: there attention's products are {attention / rest:.4g} times the rest.",
                    details, mistake="crossover-t-wrong")
    return (
        f"at your T the two are equal on all {len(configs)} configs (FlopCounterMode): "
        "for longer sequences attention dominates and 6N misses more than half of the work.",
        [f"first config: T = {_whole(answers[configs[0]])}"],
    )
