"""Figures for Section 3 and Project aside 5.2: the stream across depth, small updates, the variance of the 2L
residual writes at initialization (the Jacobians' figures: viz/jacobians.py).

Pure functions: each takes numbers computed by gptlib.analysis.residual and returns a matplotlib Figure (show it
with gptlib.viz.display.show_figure).
"""

from __future__ import annotations

import torch
from matplotlib.figure import Figure

from ..analysis.residual import BlockDropLosses, BranchWriteRatios, WriteVariance
from ..printing import coarse


def stream_figure(norms: dict[str, torch.Tensor], cosines: dict[str, torch.Tensor]) -> Figure:
    """Remarks 3.2 and 3.4: the mean row norm of X^(l) and its cosine with X^(0), against l, per model."""
    fig = Figure(figsize=(10, 3.4))
    left, right = fig.subplots(1, 2)
    for name, values in norms.items():
        left.plot(range(len(values)), values, marker="o", label=name)
    for name, values in cosines.items():
        right.plot(range(len(values)), values, marker="o", label=name)
    left.set_xlabel("layer l")
    left.set_ylabel("mean ||X_t^(l)||")
    left.set_title("the stream grows by increments")
    right.set_xlabel("layer l")
    right.set_ylabel("mean cos(X_t^(l), X_t^(0))")
    right.set_title("cosine with the embedding X^(0)")
    for ax in (left, right):
        ax.legend()
    fig.tight_layout()
    ends = "; ".join(f"{name}: norm {coarse(norms[name][0])} at l = 0, {coarse(norms[name][-1])} at l = {len(norms[name]) - 1}, "
                     f"cosine {float(cosines[name][-1]):.2f} there" for name in norms)
    fig.set_label(f"Left: the mean row norm of X^(l) against layer l; right: its mean cosine with X^(0); {ends}.")
    return fig


def small_updates_figure(ratios: BranchWriteRatios, drops: BlockDropLosses) -> Figure:
    """Empirical aside 3.5: per block, ||write|| / ||stream|| for both branches, and the loss increase
    when the block is dropped."""
    fig = Figure(figsize=(10, 3.4))
    left, right = fig.subplots(1, 2)
    blocks = list(range(len(drops.dropped)))
    left.bar([block - 0.2 for block in blocks], ratios.attn.tolist(), width=0.4, label="attention write / ||X^(l)||")
    left.bar([block + 0.2 for block in blocks], ratios.mlp.tolist(), width=0.4, label="MLP write / ||Y^(l)||")
    left.set_xlabel("block l")
    left.set_ylabel("mean norm ratio")
    left.legend(fontsize=8)
    right.bar(blocks, (drops.dropped - drops.base).tolist(), color="tab:gray")
    right.axhline(0.0, color="black", lw=0.8)
    right.set_xlabel("block l dropped")
    right.set_ylabel("loss increase (nats)")
    for ax in (left, right):
        ax.set_xticks(blocks)
    fig.tight_layout()
    increase = drops.dropped - drops.base
    worst = int(increase.argmax())
    fig.set_label(f"Per block l = 0..{len(blocks) - 1}, bars: left, the attention and the MLP write's norm over the "
                  f"stream's norm; right, the loss increase when the block is dropped, largest for block {worst} "
                  f"({float(increase[worst]):.2f} nats).")
    return fig


def init_variance_figure(L_values, scaled: list[WriteVariance], unscaled: list[WriteVariance]) -> Figure:
    """Accumulated write variance against L, with and without 1/sqrt(2L) (residual_write_variance at each L).

    The legend sits below the axes, where it cannot cover a point.
    """
    fig = Figure(figsize=(6.5, 4.6), layout="constrained")
    ax = fig.add_subplot()
    runs_styles = ((unscaled, "W_O, W_2 std 0.02", "#c44e52"), (scaled, "W_O, W_2 std 0.02/sqrt(2L)", "#4c72b0"))
    for runs, label, colour in runs_styles:
        ax.plot(L_values, [run.accumulated for run in runs], "o", color=colour,
                label=f"{label}: measured Var(X^(L) - X^(0))")
        ax.plot(L_values, [run.independent for run in runs], "-", color=colour, alpha=0.6,
                label=f"{label}: sum of write variances")
    v = unscaled[0].accumulated / 2  # one unscaled write's variance, from L = 1's two writes
    ax.plot(L_values, [2 * L * v for L in L_values], "--", color="#c44e52", lw=1, label="idealized 2L v")
    ax.plot(L_values, [v for _ in L_values], "--", color="#4c72b0", lw=1, label="idealized 2L (v / 2L) = v")
    ax.set_yscale("log")
    ax.set_xlabel("number of blocks L (2L residual writes)")
    ax.set_ylabel("variance per coordinate")
    fig.legend(loc="outside lower center", ncol=2, fontsize=7, frameon=False)
    first, last = L_values[0], L_values[-1]
    growth = [runs[-1].accumulated / runs[0].accumulated for runs in (unscaled, scaled)]
    ax.set_title(f"from L = {first} to {last}: unscaled variance x{growth[0]:.1f} (2L: x{last / first:g}), "
                 f"scaled x{growth[1]:.2f}", fontsize=9)
    fig.set_label(f"Variance per coordinate of X^(L) - X^(0) at initialization against L = {', '.join(map(str, L_values))} "
                  f"(log scale), measured and as the sum of the writes' variances, with W_O and W_2 at std 0.02 and at "
                  f"0.02/sqrt(2L), beside the idealized lines; at L = {L_values[-1]} the unscaled variance is about "
                  f"{unscaled[-1].accumulated / scaled[-1].accumulated:.0f} times the scaled one.")
    return fig
