"""`progress()`: which of the lecture's exercises and which build steps this learner has passed in this
kernel, as a small table (text and HTML) saying where each one is.

It reads the names of the checkers that have passed in this process (result.PASSED_IN_KERNEL, filled
by the `checker` decorator): a row is passed when every checker it needs has passed, partly when some
have. Nothing is stored on disk, so a restarted kernel starts from an empty table.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

from ..checking import result

# (what, where, the checkers' function names it needs; "a|b": either one)
ROWS = (
    ("Exercise 1 ★  count the parameters", "05, ✎ Your turn · Exercise 1 ★ and Exercise 5",
     ("check_parameter_count", "check_parameter_table")),
    ("Exercise 2 ★  causality", "06, ✎ Your turn · Exercise 2 ★", ("check_dependency_map", "check_causality|causality_verdict")),
    ("Exercise 3  factor pairs of W_QK", "01, ✎ Your turn · Exercise 3", ("check_factor_pair_dimension",)),
    ("Exercise 4  LayerNorm, weight decay", "04, ✎ Your turn · Exercise 4, parts 1 and 2",
     ("check_layer_norm", "check_weight_decay")),
    ("Exercise 5  tied count", "05, ✎ Your turn · Exercise 1 ★ and Exercise 5", ("check_tied_count",)),
    ("Exercise 6  ranks of a head", "01, ✎ Your turn · Exercise 6", ("check_head_circuits", "check_rank_bounds")),
    ("Exercise 7  post-norm Jacobian", "03, ✎ Your turn · Exercise 7",
     ("check_post_norm_jacobian", "check_post_norm_statement")),
    ("Exercise 8  training FLOPs", "07, ✎ Your turn · Exercise 8", ("check_training_flops", "check_attention_takeover")),
    ("Build 1  LayerNorm", "09, Step 1 · LayerNorm", ("check_layer_norm_module",)),
    ("Build 2  one attention head", "09, Step 2 · One attention head", ("check_attention_head",)),
    ("Build 3  multi-head attention", "09, Step 3 · Multi-head attention", ("check_multi_head_attention",)),
    ("Build 4  the MLP", "09, Step 4 · The MLP", ("check_mlp",)),
    ("Build 5  the pre-norm block", "09, Step 5 · The pre-norm block", ("check_block",)),
    ("Build 6  the GPT", "09, Step 6 · The GPT", ("check_gpt",)),
    ("Build 7  the initialization", "09, Step 7 · The initialization", ("check_init",)),
    # check_own_model's parts: its count (Exercise 1 ★) and causality (Exercise 2 ★) verdicts
    ("Build 8  Exercises 1 ★, 2 ★ on your GPT", "09, Step 8 · Exercises 1 ★ and 2 ★ on your own GPT",
     ("_count", "causality_verdict")),
)

PASSED, PARTLY, NOT_YET = "passed", "partly", "not yet"


@dataclass(frozen=True)
class Progress:
    """One row per exercise or build step: (what, status, where: notebook, section)."""

    rows: tuple[tuple[str, str, str], ...]

    def __repr__(self) -> str:
        width = max(len(what) for what, _, _ in self.rows)
        lines = [f"{'':<{width}}  {'status':<8}  notebook, section"]
        lines += [f"{what:<{width}}  {status:<8}  {where}" for what, status, where in self.rows]
        done = sum(status == PASSED for _, status, _ in self.rows)
        return "\n".join(lines + [f"{done} of {len(self.rows)} passed in this kernel"])

    def _repr_html_(self) -> str:
        colours = {PASSED: "#2e7d32", PARTLY: "#ef6c00", NOT_YET: "#757575"}
        body = "".join(
            f'<tr><td style="text-align:left">{html.escape(what)}</td>'
            f'<td style="color:{colours[status]}">{status}</td><td style="text-align:left">{html.escape(where)}</td></tr>'
            for what, status, where in self.rows
        )
        done = sum(status == PASSED for _, status, _ in self.rows)
        return (f"<table><tr><th></th><th>status</th><th>notebook, section</th></tr>{body}</table>"
                f"<p>{done} of {len(self.rows)} passed in this kernel</p>")


def progress() -> Progress:
    """The lecture's exercises and the build steps, each passed, partly passed or not yet, in this kernel."""
    passed = result.PASSED_IN_KERNEL
    rows = []
    for what, where, needed in ROWS:
        count = sum(any(name in passed for name in alternatives.split("|")) for alternatives in needed)
        status = PASSED if count == len(needed) else PARTLY if count else NOT_YET
        rows.append((what, status, where))
    return Progress(tuple(rows))
