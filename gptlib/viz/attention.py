"""Attention figures and the attention explorer (Lecture 5, Section 1).

    token_labels(text)                    characters made legible on an axis ('\\n', '␣')
    attention_view(model, text, l, h)     the numbers the explorer draws, or a ValueError saying why not
    attention_figure(view)                A^h as a heatmap beside every head's write norm per position
    singular_values_figure(spectra, ...)  singular values on a log scale with the rank tolerance
    AttentionExplorer(model)              the widget: text box, layer and head selectors, the figure
"""

from __future__ import annotations

import html
from dataclasses import dataclass

import ipywidgets as widgets
import torch
from matplotlib.figure import Figure

from .. import circuits
from ..cache import run_with_cache
from ..data import encode
from ..model import GPT
from .display import show_figure

SHOWN = {"\n": "\\n", " ": "␣"}


def token_labels(text: str) -> list[str]:
    """One label per character, newline shown as '\\n' and space as '␣' so both are visible."""
    return [SHOWN.get(ch, ch) for ch in text]


@dataclass(frozen=True)
class AttentionView:
    """What the explorer shows for one text, layer and head."""

    labels: list[str]  # T characters
    layer: int
    head: int
    A: torch.Tensor  # (T, T): A^h of that layer, row t = query position t
    write_norms: torch.Tensor  # (H, T): ||A^h X W_OV^h||_2 at each position, every head


@torch.no_grad()
def attention_view(model: GPT, text: str, layer: int, head: int) -> AttentionView:
    """Run `model` on `text` and collect A^h and the per-head write norms (Proposition 1.2's terms).

    Raises ValueError for empty text, text longer than T_max, characters outside the course
    vocabulary, or a layer or head the model does not have.
    """
    config = model.config
    if not text:
        raise ValueError("type at least one character")
    if len(text) > config.T_max:
        raise ValueError(f"the text has {len(text)} characters; this model reads at most T_max = {config.T_max}")
    if not 0 <= layer < config.L:
        raise ValueError(f"layer must lie in [0, L) = [0, {config.L}), got {layer}")
    if not 0 <= head < config.H:
        raise ValueError(f"head must lie in [0, H) = [0, {config.H}), got {head}")
    idx = encode(text)  # (T,); ValueError naming unknown characters
    _, cache = run_with_cache(model, idx)
    X = circuits.attention_input(model, cache, layer)  # (1, T, d)
    writes = circuits.head_contributions(model.blocks[layer].attn, X, cache.A(layer))  # (1, H, T, d)
    return AttentionView(token_labels(text), layer, head, cache.A(layer)[0, head], writes[0].norm(dim=-1))


def attention_figure(view: AttentionView) -> Figure:
    """Left: A^h with query characters down and key characters across. Right: each head's write norm."""
    T = len(view.labels)
    H = view.write_norms.shape[0]
    font = 9 if T <= 24 else 6
    fig = Figure(figsize=(12, 5.2), layout="constrained")
    heat, bars = fig.subplots(1, 2, width_ratios=(1, 1.25))
    image = heat.imshow(view.A.numpy(), cmap="viridis", vmin=0.0, vmax=1.0)
    heat.set_xticks(range(T), view.labels, fontsize=font)
    heat.set_yticks(range(T), view.labels, fontsize=font)
    heat.set_xlabel("key position s (attended to)")
    heat.set_ylabel("query position t")
    heat.set_title(f"A^h, layer {view.layer}, head {view.head}: row t sums to 1")
    fig.colorbar(image, ax=heat, shrink=0.8)
    width = 0.8 / H
    positions = torch.arange(T, dtype=torch.float64)
    for h in range(H):
        bars.bar(
            (positions + (h - (H - 1) / 2) * width).numpy(),
            view.write_norms[h].numpy(),
            width=width,
            alpha=1.0 if h == view.head else 0.35,
            label=f"head {h}" + (" (shown left)" if h == view.head else ""),
        )
    bars.set_xticks(range(T), view.labels, fontsize=font)
    bars.set_xlabel("position t")
    bars.set_ylabel("||(A^h X W_OV^h)_t||")
    bars.set_title(f"each head's write to the stream, layer {view.layer}")
    bars.legend(fontsize=8)
    return fig


def singular_values_figure(spectra: dict[str, torch.Tensor], tolerance: float | None, title: str) -> Figure:
    """Singular values (descending) of several matrices on a log scale, with the rank tolerance drawn."""
    fig = Figure(figsize=(7, 3.8), layout="constrained")
    ax = fig.subplots()
    for name, sigma in spectra.items():
        ax.semilogy(range(1, len(sigma) + 1), sigma.clamp(min=1e-30).numpy(), marker=".", label=name)
    if tolerance is not None:
        ax.axhline(tolerance, color="black", linestyle="--", linewidth=1, label="rank tolerance")
    ax.set_xlabel("index i")
    ax.set_ylabel("sigma_i")
    ax.set_title(title)
    ax.legend(fontsize=8)
    return fig


class AttentionExplorer(widgets.VBox):
    """Type text, pick a layer and a head, see A^h and every head's write per position.

    Works with any GPT (a trained checkpoint or a seeded random model). Controls are
    attributes so tests can drive it: `text`, `layer`, `head`; `message` says what is wrong
    when nothing can be drawn; `view` holds the numbers of the last drawing (None if none).
    CSS classes: gptlib-attn-explorer (the whole widget), gptlib-attn-text, gptlib-attn-layer,
    gptlib-attn-head, gptlib-attn-message, gptlib-attn-output.
    """

    def __init__(self, model: GPT, text: str = "First Citizen:\nBefore we proceed"):
        self.model = model.eval()
        config = model.config
        self.text = widgets.Textarea(value=text, description="text", layout=widgets.Layout(width="60%"))
        self.layer = widgets.Dropdown(options=list(range(config.L)), value=0, description="layer")
        self.head = widgets.Dropdown(options=list(range(config.H)), value=0, description="head")
        self.message = widgets.HTML()
        self.output = widgets.Output()
        self.view: AttentionView | None = None
        for control, name in ((self.text, "text"), (self.layer, "layer"), (self.head, "head")):
            control.add_class(f"gptlib-attn-{name}")
            control.observe(self.update, names="value")
        self.message.add_class("gptlib-attn-message")
        self.output.add_class("gptlib-attn-output")
        super().__init__([self.text, widgets.HBox([self.layer, self.head]), self.message, self.output])
        self.add_class("gptlib-attn-explorer")
        self.update()

    def update(self, _change=None) -> None:
        """Recompute and redraw; on bad input show the reason in `message` and clear the figure."""
        try:
            self.view = attention_view(self.model, self.text.value, self.layer.value, self.head.value)
        except ValueError as error:
            self.view = None
            self.message.value = f"<b>Cannot draw:</b> {html.escape(str(error), quote=False)}"
            self.output.clear_output()
            return
        self.message.value = f"{len(self.view.labels)} characters, layer {self.view.layer}, head {self.view.head}"
        self.output.clear_output(wait=True)
        with self.output:
            show_figure(attention_figure(self.view))
