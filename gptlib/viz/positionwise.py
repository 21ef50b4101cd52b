"""Figures for Section 2: the exact GELU of Definition 2.1 and its tanh approximation."""

from __future__ import annotations

import torch
from matplotlib.figure import Figure

from ..analysis.positionwise import gelu_exact, gelu_tanh
from ..printing import coarse


def gelu_figure(t: torch.Tensor) -> Figure:
    """Left: t Phi(t) with ReLU for comparison. Right: the tanh form minus the exact GELU, on the points t."""
    exact, approx = gelu_exact(t), gelu_tanh(t)
    fig = Figure(figsize=(10, 3.4), layout="constrained")
    left, right = fig.subplots(1, 2)
    left.plot(t.numpy(), exact.numpy(), label="t Phi(t)")
    left.plot(t.numpy(), torch.relu(t).numpy(), linestyle=":", label="ReLU, for comparison")
    left.set_xlabel("t")
    left.set_ylabel("GELU(t), ReLU(t)")
    left.set_title("exact GELU")
    left.legend()
    right.plot(t.numpy(), (approx - exact).numpy())
    right.set_xlabel("t")
    right.set_ylabel("GELU_tanh(t) - GELU(t)")
    right.set_title("tanh approximation minus exact GELU")
    fig.set_label(f"Left: the exact GELU t Phi(t) beside ReLU for t from {t.min().item():g} to {t.max().item():g}. "
                  f"Right: the tanh form minus the exact GELU, at most {coarse((approx - exact).abs().max())} in size.")
    return fig
