"""Figures of the residual stream read by write (Remark 3.4; gptlib.analysis.decomposition and .patching).

    attribution_figure(a, title)    a bar per write at its direct contribution to one logit
    describe_attribution(a, title)  its text alternative (the stream explorer's bars say the same)
    logit_lens_figure(readings, u)  a line per lens reading through its losses, depth by depth

The stream explorer, which draws these numbers in the page, is gptlib.viz.stream.
"""

from __future__ import annotations

import textwrap

import torch
from matplotlib.figure import Figure

from ..analysis.decomposition import Attribution, LensReading


def attribution_figure(attribution: Attribution, title: str, quantity: str = "logit") -> Figure:
    """One bar per write: its direct contribution to a logit (Attribution), the largest three named in the label.
    quantity names what the bars add up to on the y-axis: "logit", or "logit difference" for an attribution made
    `against` a second token."""
    fig = Figure(figsize=(bars_width(attribution), 3.6), layout="constrained")
    attribution_bars(fig.subplots(), attribution, title, quantity)
    fig.set_label(describe_attribution(attribution, title, quantity))
    return fig


def bars_width(attribution: Attribution) -> float:
    """Inches: room for a bar per write."""
    return max(6, 0.28 * len(attribution.values))


def wrapped(title: str, inches: float) -> str:
    """A title broken into lines that fit a figure `inches` wide at fontsize 10 (about 11 characters an inch)."""
    return "\n".join(textwrap.wrap(title, width=int(10 * inches)))


def attribution_bars(ax, attribution: Attribution, title: str, quantity: str) -> None:
    """attribution_figure's bars drawn on the axes `ax`."""
    values = attribution.values.detach().numpy()
    colours = ["#1565c0" if v >= 0 else "#c62828" for v in values]
    ax.bar(range(len(values)), values, color=colours)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(values)), attribution.labels, rotation=90, fontsize=8)
    ax.set_xlabel("write into the stream")
    ax.set_ylabel(f"direct contribution to the {quantity}")
    ax.set_title(wrapped(title, bars_width(attribution)), fontsize=10)


def describe_attribution(attribution: Attribution, title: str, quantity: str = "logit") -> str:
    """The text alternative of an attribution's bars (attribution_figure's, and the stream explorer's):
    how many writes, the three largest in size, and the `quantity` (a logit, or a logit difference) they
    add up to with LN_f's bias."""
    values = attribution.values.tolist()
    top = sorted(zip(attribution.labels, values), key=lambda pair: -abs(pair[1]))[:3]
    return (f"{title}: a bar per write into the stream ({len(values)} writes); the largest in size are "
            + ", ".join(f"{label} ({value:+.2f})" for label, value in top)
            + f"; with LN_f's bias ({attribution.rest:+.2f}) they add up to the {quantity} {attribution.logit:+.2f}.")


def logit_lens_figure(readings: dict[str, LensReading], uniform: float) -> Figure:
    """The loss of the stream read out after each block (LensReading.loss), one line per reading, and ln V."""
    fig = Figure(figsize=(5.5, 3.6), layout="constrained")
    ax = fig.subplots()
    for name, reading in readings.items():
        depth = torch.arange(len(reading.loss)).numpy()
        ax.plot(depth, reading.loss.numpy(), marker="o", label=name)
    ax.axhline(uniform, color="gray", linestyle="--", linewidth=0.8, label="uniform guess, ln V")
    ax.set_xlabel("depth l: X^(l) read out through LN_f and W_U (0 = the embeddings)")
    ax.set_ylabel("loss, nats per character")
    ax.set_xticks(depth)
    ax.legend()
    fig.set_label("The logit lens: loss of the stream read out after each block, "
                  + "; ".join(f"{name} from {r.loss[0]:.2f} at depth 0 to {r.loss[-1]:.2f} at depth {len(r.loss) - 1}"
                              for name, r in readings.items())
                  + f" nats per character (uniform guessing: {uniform:.2f}).")
    return fig
