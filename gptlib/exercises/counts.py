"""Exercises 1 (★) and 5: Theorem 5.2 re-derived, and the count under weight tying W_U = E^T.

The truth is always `numel()` of a real gptlib GPT built on the meta device (no memory, no
arithmetic), on the course configuration and on random ones. A wrong count is compared with
the typical mistakes below: each is the difference (learner - truth) it would make, as a
function of the configuration; a mistake is named when it explains every configuration.
"""

from __future__ import annotations

import random
from itertools import combinations

from ..config import COURSE_CONFIG, GPTConfig
from ..counting import COMPONENTS, measured_table
from .result import Wrong, as_int, call, checker, recognise

EX1, EX5 = "Exercise 1 ★", "Exercise 5"

# (learner - numel) that a typical mistake produces, as a function of the configuration c.
COUNT_MISTAKES = {
    "your count includes biases on W_Q, W_K, W_V (3d per block): Theorem 5.2 has none": lambda c: 3 * c.L * c.d,
    "your count includes a bias on W_U (V numbers): Theorem 5.2 has none": lambda c: 0 if c.tie_weights else c.V,
    "you left out the positional embeddings P (T_max x d)": lambda c: -c.T_max * c.d,
    "you left out the final LayerNorm LN_f (d gains and d shifts)": lambda c: -2 * c.d,
    "you left out one d-vector per block: the attention output bias b_O (or the MLP's b_2, same size)": lambda c: -c.L * c.d,
    "you left out the MLP biases b_1 and b_2 (d_ff + d per block)": lambda c: -c.L * (c.d_ff + c.d),
    "you left out 4d per block: both block LayerNorms (or b_1, which has 4d entries too)": lambda c: -4 * c.L * c.d,
    "you counted one LayerNorm per block: each block has two, LN_1 and LN_2": lambda c: -2 * c.L * c.d,
    "you counted one vector per LayerNorm: each has d gains AND d shifts": lambda c: -(2 * c.L + 1) * c.d,
    "you left out W_O (d x d per block)": lambda c: -c.L * c.d * c.d,
    "you counted W_Q, W_K, W_V for one head only (3 d d_head per block): there is one per head": lambda c: -3
    * c.L
    * (c.d * c.d - c.d * c.d_head),
    "you counted one MLP weight matrix: there are two, W_1 (d_ff x d) and W_2 (d x d_ff)": lambda c: -c.L * c.d * c.d_ff,
    "with tied weights W_U is E^T, no new parameters: your count adds dV for it (E counted twice)": lambda c: (
        c.d * c.V if c.tie_weights else 0
    ),
    "with tied weights E is still there: only the separate W_U disappears, you removed dV twice": lambda c: (
        -c.d * c.V if c.tie_weights else 0
    ),
    "you left out the unembedding W_U (d x V)": lambda c: 0 if c.tie_weights else -c.d * c.V,
}


def numel(config: GPTConfig) -> int:
    """Trainable parameters of a real GPT with this config: the table's total row."""
    return measured_table(config)[-1]


def random_configs(n: int, tied: bool | None, seed: int = 0) -> list[GPTConfig]:
    """n random configurations with d_ff = 4d; tied: all tied, none tied, or (None) alternating."""
    rng = random.Random(seed)
    configs = []
    for i in range(n):
        H = rng.choice((1, 2, 3, 4, 6, 8))
        tie = (i % 2 == 1) if tied is None else tied
        configs.append(
            GPTConfig(
                V=rng.randint(2, 600), T_max=rng.randint(1, 300), d=H * rng.randint(1, 24), H=H, L=rng.randint(1, 4),
                tie_weights=tie,
            )
        )
    return configs


def explain(deltas: dict[GPTConfig, int], mistakes: dict = COUNT_MISTAKES) -> list[str]:
    """The mistake (or pair of mistakes) whose predicted differences equal `deltas` on every config."""
    single = recognise(deltas, mistakes)
    if single:
        return single[:1]
    pairs = {(a, b): lambda c, da=da, db=db: da(c) + db(c) for (a, da), (b, db) in combinations(mistakes.items(), 2)}
    pair = recognise(deltas, pairs)
    return list(pair[0]) if pair else []


def _describe(c: GPTConfig) -> str:
    tied = ", tied" if c.tie_weights else ""
    return f"(V, T_max, d, H, L) = ({c.V}, {c.T_max}, {c.d}, {c.H}, {c.L}){tied}"


def _compare_counts(count, configs: list[GPTConfig], name: str) -> tuple[str, list[str]]:
    """Call count(c) on every config, compare with numel; reject with the recognised mistake."""
    if not callable(count):  # a plain number: the course configuration only
        got, truth = as_int(count, "your count"), numel(configs[0])
        if got != truth:
            names = explain({configs[0]: got - truth})
            raise Wrong(f"{got:,} is not the number of parameters ({'; '.join(names) or 'recount row by row'}).")
        return f"{got:,} is right for the course configuration (a number; pass a function to check it for any config).", []
    answers = {c: as_int(call(count, c, what="config"), f"{name}({_describe(c)})") for c in configs}
    truths = {c: numel(c) for c in configs}
    wrong = [c for c in configs if answers[c] != truths[c]]
    if not wrong:
        tied = sum(c.tie_weights for c in configs[1:])
        return (
            f"equal to numel() of the real model on all {len(configs)} configurations.",
            [f"course configuration {answers[configs[0]]:,}; {len(configs) - 1} random ones ({tied} tied)"],
        )
    if len(set(answers.values())) == 1:
        raise Wrong(f"your function returns {answers[configs[0]]:,} whatever the config: compute it from config.V, config.d, ...")
    first = wrong[0]
    gap = answers[first] - truths[first]
    details = [f"for {_describe(first)}: yours {answers[first]:,}, numel() {truths[first]:,} (off by {gap:+,})"]
    names = explain({c: answers[c] - truths[c] for c in configs})
    if names:
        raise Wrong(" and ".join(names) + ".", details)
    right = len(configs) - len(wrong)
    raise Wrong(f"wrong on {len(wrong)} of {len(configs)} configurations ({right} right); recount row by row.", details)


@checker(EX1)
def check_parameter_count(count) -> tuple[str, list[str]]:
    """Exercise 1: count(config) -> int, the number of trainable parameters, with W_U = E^T
    when config.tie_weights. Compared with numel() on the course config and 11 random ones."""
    return _compare_counts(count, [COURSE_CONFIG] + random_configs(11, tied=None), "count")


@checker(EX1)
def check_parameter_table(rows) -> tuple[str, list[str]]:
    """Exercise 1: the lecture's five rows, either rows(config) -> 5 numbers or 5 numbers for the
    course configuration, in the lecture's order (embeddings, attention, MLPs, block LayerNorms,
    final LayerNorm and unembedding)."""
    names = [component for component, _ in COMPONENTS]
    configs = [COURSE_CONFIG] + (random_configs(6, tied=False) if callable(rows) else [])
    for c in configs:
        answer = call(rows, c, what="config") if callable(rows) else rows
        if isinstance(answer, dict):
            answer = [answer.get(name) for name in names]
        if not isinstance(answer, (list, tuple)) or len(answer) != 5:
            raise Wrong(f"expected the five rows {names} in that order, got {answer!r:.80}")
        got = [as_int(value, f"the row {name!r}") for value, name in zip(answer, names)]
        truth = measured_table(c)[:-1]  # the five rows, without the total
        for name, g, t in zip(names, got, truth):
            if g != t:
                mistake = explain({c: g - t})
                hint = f": {mistake[0]}" if mistake else ""
                raise Wrong(f"the row {name!r} is off by {g - t:+,}{hint}.", [f"for {_describe(c)}: yours {g:,}, measured {t:,}"])
    where = f"the course configuration and {len(configs) - 1} random ones" if callable(rows) else "the course configuration"
    return f"all five rows equal the measured table on {where}.", []


@checker(EX5)
def check_tied_count(count) -> tuple[str, list[str]]:
    """Exercise 5: count(config) -> int, the number of parameters when W_U = E^T. Every config it
    receives has tie_weights=True. Compared with numel() of tied models (course config, 7 random);
    a plain number is checked against the course configuration."""
    configs = [COURSE_CONFIG.replace(tie_weights=True)] + random_configs(7, tied=True, seed=1)
    return _compare_counts(count, configs, getattr(count, "__name__", "count"))
