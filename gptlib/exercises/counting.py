"""Exercises 1 (★) and 5: Theorem 5.2 re-derived, and the count under weight tying W_U = E^T.

The truth is always `numel()` of a real gptlib GPT built on the meta device (no memory, no
arithmetic), on the course configuration and on random ones. A wrong count is compared with
the typical mistakes of count_differences.DIFFERENCES (every row is a mistake here): each is the
difference (learner - truth) it would make, as a function of the configuration; a mistake is named
when it explains every configuration.
"""

from __future__ import annotations

import random

from ..analysis.counting import COMPONENTS, measured_table
from ..checking.mistakes import name_mistake
from ..checking.reading import as_int, as_numbers
from ..checking.running import Wrong, call, checker
from ..checking.variants import variant_seed
from ..config import COURSE_CONFIG, GPTConfig
from .count_differences import DIFFERENCES

EX1, EX5 = "Exercise 1 ★", "Exercise 5"

def numel(config: GPTConfig) -> int:
    """Trainable parameters of a real GPT with this config: the table's total row."""
    return measured_table(config)[-1]


def random_configs(n: int, tied: bool | None, seed: int = 0) -> list[GPTConfig]:
    """n random configurations; tied: all tied, none tied, or (None) alternating. Every field the
    count depends on varies, d_ff included: two in three have a d_ff other than 4d (some below d),
    so a formula with d_ff = 4d built in fails."""
    rng = random.Random(variant_seed(seed))
    configs = []
    for i in range(n):
        H = rng.choice((1, 2, 3, 4, 6, 8))
        d = H * rng.randint(1, 24)
        d_ff = None if i % 3 == 0 else rng.choice([k for k in range(1, 6 * d + 2) if k != 4 * d])
        tie = (i % 2 == 1) if tied is None else tied
        configs.append(
            GPTConfig(V=rng.randint(2, 600), T_max=rng.randint(1, 300), d=d, H=H, L=rng.randint(1, 4), d_ff=d_ff,
                      tie_weights=tie)
        )
    return configs


def count_mistakes(row: int | None = None) -> dict:
    """The typical mistakes as {what: (learner - truth) it makes, a function of the config}; row:
    only those of that table row. mistakes.name_mistake(deltas, count_mistakes(), pairs=True) names them."""
    return {d.what: d.delta for d in DIFFERENCES if row is None or d.row in (row, None)}


def _describe(c: GPTConfig) -> str:
    tied = ", tied" if c.tie_weights else ""
    return f"(V, T_max, d, H, L, d_ff) = ({c.V}, {c.T_max}, {c.d}, {c.H}, {c.L}, {c.d_ff}){tied}"


def _compare_counts(count, configs: list[GPTConfig], name: str) -> tuple[str, list[str]]:
    """Call count(c) on every config, compare with numel; reject with the recognised mistake."""
    if not callable(count):  # a plain number: the course configuration only
        got, truth = as_int(count, "your count"), numel(configs[0])
        if got != truth:
            named = name_mistake({configs[0]: got - truth}, count_mistakes(), pairs=True) or "recount row by row"
            raise Wrong(f"{got:,} is not the number of parameters (off by {got - truth:+,}: {named}).", mistake=None)
        return f"{got:,} is right for the course configuration (a number; pass a function to check it for any config).", []
    answers = {c: as_int(call(count, c, what="config"), f"{name}({_describe(c)})") for c in configs}
    truths = {c: numel(c) for c in configs}
    wrong = [c for c in configs if answers[c] != truths[c]]
    if not wrong:
        tied = sum(c.tie_weights for c in configs[1:])
        other_d_ff = sum(c.d_ff != 4 * c.d for c in configs)
        return (
            f"equal to numel() of the real model on all {len(configs)} configurations.",
            [f"course configuration {answers[configs[0]]:,}; {len(configs) - 1} random ones ({tied} tied,"
             f" {other_d_ff} with d_ff != 4d)"],
        )
    if len(set(answers.values())) == 1:
        raise Wrong(f"your function returns {answers[configs[0]]:,} whatever the config: compute it from config.V, config.d, ...",
                    mistake="count-ignores-config")
    details = [f"for {_describe(c)}: yours {answers[c]:,}, numel() {truths[c]:,} (off by {answers[c] - truths[c]:+,})"
               for c in wrong[:3]]
    named = name_mistake({c: answers[c] - truths[c] for c in configs}, count_mistakes(), pairs=True)
    if named:
        raise Wrong(f"your count differs from numel(): {named}.", details, mistake=None)
    right = len(configs) - len(wrong)
    raise Wrong(f"wrong on {len(wrong)} of {len(configs)} configurations ({right} right); recount row by row.", details,
                mistake=None)


@checker(EX1)
def check_parameter_count(count) -> tuple[str, list[str]]:
    """Exercise 1: count(config) -> int, the number of trainable parameters, with W_U = E^T
    when config.tie_weights. Compared with numel() on the course config and 11 random ones
    (which vary V, T_max, d, H, L, d_ff and tying)."""
    return _compare_counts(count, [COURSE_CONFIG] + random_configs(11, tied=None), "count")


def _five_rows(answer, names: list[str]) -> list[int]:
    """A learner's table as five ints: a list, tuple, 1-d numpy array or tensor, or a dict (by the
    lecture's row names when it uses them all, else its five values in their order: keys are the learner's)."""
    if isinstance(answer, dict):
        answer = [answer[name] for name in names] if set(names) <= set(answer) else list(answer.values())
    rows = as_numbers(answer, tuple(names), "the five rows in the lecture's order")
    return [as_int(value, f"the row {name!r}") for value, name in zip(rows, names)]


@checker(EX1)
def check_parameter_table(rows) -> tuple[str, list[str]]:
    """Exercise 1: the lecture's five rows, either rows(config) -> 5 numbers or 5 numbers for the
    course configuration, in the lecture's order (embeddings, attention, MLPs, block LayerNorms,
    final LayerNorm and unembedding), as a list, tuple, dict, numpy array or tensor."""
    names = [component for component, _ in COMPONENTS]
    configs = [COURSE_CONFIG] + (random_configs(6, tied=False) if callable(rows) else [])
    got = {c: _five_rows(call(rows, c, what="config") if callable(rows) else rows, names) for c in configs}
    for i, name in enumerate(names):
        deltas = {c: got[c][i] - measured_table(c)[i] for c in configs}
        wrong = [c for c in configs if deltas[c]]
        if wrong:
            c = wrong[0]
            named = name_mistake(deltas, count_mistakes(row=i), pairs=True)
            hint = f": {named}" if named else ""
            details = [f"for {_describe(c)}: yours {got[c][i]:,}, measured {measured_table(c)[i]:,}"]
            raise Wrong(f"the row {name!r} is off by {deltas[c]:+,}{hint}.", details, mistake="count-table-row-off")
    where = f"the course configuration and {len(configs) - 1} random ones" if callable(rows) else "the course configuration"
    return f"all five rows equal the measured table on {where}.", []


@checker(EX5)
def check_tied_count(count) -> tuple[str, list[str]]:
    """Exercise 5: count(config) -> int, the number of parameters when W_U = E^T. Every config it
    receives has tie_weights=True. Compared with numel() of tied models (course config, 7 random
    ones varying every field, d_ff included);
    a plain number is checked against the course configuration."""
    configs = [COURSE_CONFIG.replace(tie_weights=True)] + random_configs(7, tied=True, seed=1)
    return _compare_counts(count, configs, getattr(count, "__name__", "count"))
