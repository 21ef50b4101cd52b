"""Theorem 5.2 (exact parameter count) in closed form, and the lecture's table measured from a model."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
from torch import nn

from ..config import GPTConfig
from ..model import GPT


def theorem_5_2(config: GPTConfig) -> int:
    """2Vd + T_max d + L(12d^2 + 10d) + 2d for an untied model with d_ff = 4d.

    For other d_ff or for tied weights this is the general form of the same sum:
    embeddings Vd + T_max d; per block attention 4d^2 + d, MLP 2 d d_ff + d_ff + d,
    two LayerNorms 4d; final LayerNorm 2d; unembedding dV unless W_U = E^T (Exercise 5).
    An attention-only block keeps only attention and LN_1.
    """
    V, T_max, d, L, d_ff = config.V, config.T_max, config.d, config.L, config.d_ff
    embeddings = V * d + T_max * d
    attention_half = (4 * d * d + d) + 2 * d
    mlp_half = 0 if config.attn_only else (2 * d * d_ff + d_ff + d) + 2 * d
    per_block = attention_half + mlp_half
    unembedding = 0 if config.tie_weights else d * V
    return embeddings + L * per_block + 2 * d + unembedding


# The lecture's rows, each with the parameter-name test that puts a parameter in it.
COMPONENTS = (
    ("token and positional embeddings", lambda name: name in ("E", "P")),
    ("attention in all blocks", lambda name: ".attn." in name),
    ("MLPs in all blocks", lambda name: ".mlp." in name),
    ("block LayerNorms", lambda name: ".ln_1." in name or ".ln_2." in name),
    ("final LayerNorm and unembedding", lambda name: name.startswith("ln_f.") or name == "W_U"),
)


@dataclass(frozen=True)
class Row:
    component: str
    parameters: int
    share: float  # fraction of the total


def component_table(model: nn.Module) -> list[Row]:
    """The lecture's parameter table, each count summed from the model's own parameters.

    Raises ValueError if a parameter fits no row or more than one, so a new parameter
    cannot slip past the accounting, or if there is nothing to count (no shares without a total).
    """
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    counts = dict.fromkeys((component for component, _ in COMPONENTS), 0)
    for name, p in model.named_parameters():
        rows = [component for component, belongs in COMPONENTS if belongs(name)]
        if len(rows) != 1:
            raise ValueError(f"parameter {name!r} belongs to {len(rows)} rows of the table, not exactly one")
        counts[rows[0]] += p.numel()
    total = sum(counts.values())
    if total == 0:
        raise ValueError(f"model ({type(model).__name__}) has no parameters to count")
    rows = [Row(component, n, n / total) for component, n in counts.items()]
    return rows + [Row("total", total, 1.0)]


@functools.cache
def measured_table(config: GPTConfig) -> tuple[int, ...]:
    """The table's six counts (the five rows, then the total) for a GPT with this config, summed
    from a real model built on the meta device (shapes only: no memory, no arithmetic)."""
    with torch.device("meta"):
        return tuple(row.parameters for row in component_table(GPT(config)))


def format_table(rows: list[Row]) -> str:
    """The table as the lecture prints it: component, parameters with thousands separators, share.

    Each column is as wide as its header or its widest entry; no rows print the header alone.
    """
    width = max([len("component")] + [len(row.component) for row in rows])
    digits = max([len("parameters")] + [len(f"{row.parameters:,}") for row in rows])  # aligned at any size
    lines = [f"{'component':<{width}}  {'parameters':>{digits}}  {'share':>6}"]
    lines += [f"{row.component:<{width}}  {row.parameters:>{digits},}  {row.share:>6.1%}" for row in rows]
    return "\n".join(lines)
