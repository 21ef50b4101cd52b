"""Figures for Section 3's Jacobians: one block's Jacobian spectrum, the depth studies of Exercise 7.

Pure functions: each takes numbers computed by gptlib.analysis.jacobians and returns a matplotlib Figure
(show it with gptlib.viz.display.show_figure).
"""

from __future__ import annotations

import torch
from matplotlib.figure import Figure

from ..analysis.jacobians import DepthStudyRow
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
