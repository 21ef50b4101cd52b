"""Figures for Section 3 and Project aside 5.2: block Jacobian spectra, depth studies (Exercise 7),
the stream across depth, the variance of the 2L residual writes at initialization.

Pure functions: each takes numbers computed by gptlib.analysis.jacobians / gptlib.analysis.residual and returns a
matplotlib Figure (show it with gptlib.viz.display.show_figure).
"""

from __future__ import annotations

import torch
from matplotlib.figure import Figure

from ..analysis.jacobians import DepthStudyRow
from ..analysis.residual import BlockDropLosses, BranchWriteRatios, WriteVariance
from ..printing import coarse

NEGLIGIBLE = 1e-6  # a singular value below this is counted as zero in the text alternative
NORM_STYLE = {"pre": {"color": "tab:blue", "label": "pre-norm"}, "post": {"color": "tab:red", "label": "post-norm"}}


def block_spectrum_figure(singular_values: dict[str, torch.Tensor]) -> Figure:
    """Sorted singular values of one block's Jacobian, one curve per norm placement ('pre', 'post')."""
    fig = Figure(figsize=(6.5, 3.6))
    ax = fig.add_subplot()
    for norm, values in singular_values.items():
        ax.semilogy(values.clamp_min(1e-17).numpy(), **NORM_STYLE[norm])
    ax.axhline(1.0, color="gray", lw=0.8, ls=":")
    ax.set_xlabel("index (descending)")
    ax.set_ylabel("singular value")
    ax.set_title("one block's Jacobian d vec(X') / d vec(X)")
    ax.legend()
    fig.tight_layout()
    fig.set_label("Singular values of one block's Jacobian in descending order, log scale, the value 1 dotted; "
                  + "; ".join(f"{NORM_STYLE[norm]['label']}: {len(values)} values, largest {coarse(values.max())}, "
                              f"{int((values < NEGLIGIBLE).sum())} below {NEGLIGIBLE:g}"
                              for norm, values in singular_values.items())
                  + ".")
    return fig


def depth_study_figure(studies: dict[str, list[DepthStudyRow]]) -> Figure:
    """Exercise 7: left, the largest / median / smallest singular value of d X^(L) / d X^(0) against L;
    right, ||d loss / d X^(l)|| against l for the deepest model. `studies` maps 'pre'/'post' to
    the rows of gptlib.analysis.jacobians.depth_study."""
    fig = Figure(figsize=(11, 3.8))
    left, right = fig.subplots(1, 2)
    for norm, rows in studies.items():
        style = NORM_STYLE[norm]
        depths = [row.L for row in rows]
        values = torch.stack([row.singular_values for row in rows])  # (n_depths, T d), descending
        left.semilogy(depths, values[:, 0], marker="^", ms=3, color=style["color"], label=f"{style['label']} max")
        left.semilogy(depths, values.median(dim=1).values, ls="--", color=style["color"],
                      label=f"{style['label']} median")
        left.semilogy(depths, values[:, -1].clamp_min(1e-17), marker="v", ms=3, ls=":", color=style["color"],
                      label=f"{style['label']} min")
        deepest = rows[-1]
        right.semilogy(range(deepest.L + 1), deepest.gradient_norms, marker="o", ms=3, **style)
    left.set_xlabel("depth L")
    left.set_ylabel("singular value of the product")
    left.set_title("d X^(L) / d X^(0) at initialization")
    left.legend(fontsize=7, ncol=2)
    right.set_xlabel("layer l")
    right.set_ylabel("||d loss / d X^(l)||")
    right.set_title(f"gradient reaching each layer, L = {deepest.L}")
    right.legend()
    fig.tight_layout()
    ratios = "; ".join(f"{NORM_STYLE[norm]['label']}: {coarse(rows[-1].gradient_norms[0] / rows[-1].gradient_norms[-1])}"
                       for norm, rows in studies.items())
    fig.set_label(f"Left: the largest, median and smallest singular value of d X^(L) / d X^(0) at initialization against "
                  f"depth L from {depths[0]} to {depths[-1]}, log scale, per norm placement. Right: the gradient norm "
                  f"reaching each layer l = 0..{deepest.L} of the L = {deepest.L} models; at layer 0 over at layer "
                  f"{deepest.L}: {ratios}.")
    return fig


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
