"""Figures for the induction-head model (gptlib.analysis.induction)."""

from __future__ import annotations

import torch
from matplotlib.figure import Figure

NEGLIGIBLE = 1e-3  # |eigenvalue| below this fraction of the largest is counted as zero in the text alternative


def ov_eigenvalues_figure(eigenvalues: torch.Tensor, title: str) -> Figure:
    """The eigenvalues of a full OV circuit E W_OV W_U in the complex plane; a copying head's lie right of 0."""
    fig = Figure(figsize=(5, 4), layout="constrained")
    ax = fig.subplots()
    ax.scatter(eigenvalues.real.numpy(), eigenvalues.imag.numpy(), s=14)
    ax.axvline(0, color="black", linewidth=0.8)
    ax.axhline(0, color="gray", linewidth=0.5)
    ax.set_aspect("equal", adjustable="datalim")  # one scale on both axes: tiny imaginary parts look tiny
    ax.set_xlabel("real part")
    ax.set_ylabel("imaginary part")
    ax.set_title(title)
    size = eigenvalues.abs()
    kept = eigenvalues[size > NEGLIGIBLE * size.max()]  # the rest are the rank deficit's zeros, in rounding noise
    fig.set_label(f"{title}: the {len(eigenvalues)} eigenvalues in the complex plane; {len(kept)} are not negligible "
                  f"(above {NEGLIGIBLE:g} of the largest |eigenvalue|), and {int((kept.real > 0).sum())} of those "
                  "have a positive real part.")
    return fig
