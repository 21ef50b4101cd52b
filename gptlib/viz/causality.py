"""Heatmaps of the dependency maps of gptlib.analysis.causality (Remark 5.1, Exercise 2)."""

from __future__ import annotations

import numpy as np
import torch
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure


def dependency_maps_figure(maps: dict[str, torch.Tensor], tokens: str | None = None) -> Figure:
    """One heatmap per map, M[t, s] on a log colour scale; exact zeros are drawn white.

    Rows t are the logits Z_t, columns s the perturbed input x_s: a causal model leaves the
    whole upper triangle (s > t) white.
    """
    fig = Figure(figsize=(3.6 * len(maps), 3.6))
    axes = fig.subplots(1, len(maps), squeeze=False)[0]
    positive = torch.cat([m[m > 0] for m in maps.values()])
    norm = LogNorm(vmin=positive.min().item(), vmax=positive.max().item())
    for ax, (title, dependency_map) in zip(axes, maps.items()):
        values = np.ma.masked_equal(dependency_map.detach().numpy(), 0.0)  # zeros stay white
        image = ax.imshow(values, cmap="viridis", norm=norm)
        T = dependency_map.shape[0]
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("perturbed input position s")
        ax.set_ylabel("logit row t")
        if tokens is not None:
            ax.set_xticks(range(T), list(tokens), fontsize=7)
            ax.set_yticks(range(T), list(tokens), fontsize=7)
    fig.colorbar(image, ax=list(axes), shrink=0.8, label="size of the dependence (white: exactly 0)")
    T = next(iter(maps.values())).shape[0]
    above = {title: int(torch.triu(m, diagonal=1).count_nonzero()) for title, m in maps.items()}
    fig.set_label(f"Dependency maps over T = {T} positions, logit row t down, perturbed input s across, log colour "
                  "scale, exact zeros white; entries above the diagonal (s > t) that are not exactly 0: "
                  + "; ".join(f"{title}: {n} of {T * (T - 1) // 2}" for title, n in above.items()) + ".")
    return fig
