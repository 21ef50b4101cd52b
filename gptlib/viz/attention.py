"""Attention figures and the attention explorer (Lecture 5, Section 1).

    token_labels(text)                    characters made legible on an axis ('\\n', '␣')
    attention_run(model, text)            every layer's A^h and per-head write norms, one forward pass
    attention_view(model, text, l, h)     the numbers of one layer and head, or a ValueError saying why not
    attention_figure(view)                A^h as a heatmap beside every head's write norm per position
    singular_values_figure(spectra, ...)  singular values on a log scale with the rank tolerance
    AttentionExplorer(model)              the widget: text box, layer and head selectors, the figure
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import traitlets
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from .. import validation
from ..analysis import attention
from ..analysis.cache import run_with_cache
from ..data import encode
from ..model import GPT, eval_mode
from ..printing import coarse
from .display import render_png
from .page_model import ModelExplorer, model_module

SHOWN = {"\n": "\\n", " ": "␣"}


def token_labels(text: str) -> list[str]:
    """One label per character, newline shown as '\\n' and space as '␣' so both are visible."""
    return [SHOWN.get(ch, ch) for ch in text]


@dataclass(frozen=True)
class AttentionRun:
    """Everything the explorer draws for one text, every layer and head (computed once per text)."""

    labels: list[str]  # T characters, made visible
    A: torch.Tensor  # (L, H, T, T) float32: A^h of every layer, row t = query position t
    write_norms: torch.Tensor  # (L, H, T) float32: ||(A^h X W_OV^h)_t||_2, Proposition 1.2's terms

    def view(self, layer: int, head: int) -> AttentionView:
        """The numbers of one layer and head; ValueError for a layer or head the model does not have."""
        L, H = self.write_norms.shape[:2]
        layer = validation.integer("layer", layer, at_least=0, at_most=L - 1)
        head = validation.integer("head", head, at_least=0, at_most=H - 1)
        return AttentionView(self.labels, layer, head, self.A[layer, head], self.write_norms[layer])


@dataclass(frozen=True)
class AttentionView:
    """What the explorer shows for one text, layer and head."""

    labels: list[str]  # T characters
    layer: int
    head: int
    A: torch.Tensor  # (T, T): A^h of that layer, row t = query position t
    write_norms: torch.Tensor  # (H, T): ||A^h X W_OV^h||_2 at each position, every head of the layer


def attention_run(model: GPT, text: str) -> AttentionRun:
    """Run `model` once on `text` and collect A^h and the per-head write norms of every layer.

    Raises ValueError for empty text, text longer than T_max, characters outside the course
    vocabulary, or a NaN or inf weight (named: it would fill A^h with NaN). The model runs in
    eval mode (no dropout exists, but a caller's module may check) and is handed back in the
    mode it came in; any float dtype works (bfloat16 too): the results are float32, which numpy
    and matplotlib can read.
    """
    config = model.config
    if not text:
        raise ValueError("type at least one character")
    if len(text) > config.T_max:
        raise ValueError(f"the text has {len(text)} characters; this model reads at most T_max = {config.T_max}")
    idx = encode(text)  # (T,); ValueError naming unknown characters
    validation.finite_weights(model)
    with eval_mode(model):
        _, cache = run_with_cache(model, idx)
        writes = [
            attention.head_contributions(model.blocks[l].attn, attention.attention_input(model, cache, l), cache.A(l))
            for l in range(config.L)
        ]  # L tensors (1, H, T, d)
        A = torch.stack([cache.A(l)[0] for l in range(config.L)])  # (L, H, T, T)
        norms = torch.stack([write[0].norm(dim=-1) for write in writes])  # (L, H, T)
    return AttentionRun(token_labels(text), A.float(), norms.float())


def attention_view(model: GPT, text: str, layer: int, head: int) -> AttentionView:
    """A^h and the per-head write norms of one layer for `text`, or a ValueError saying why not."""
    return attention_run(model, text).view(layer, head)


# The figure is laid out in pixels (at 100 dpi), one size for every text, with plain text labels:
# matplotlib's tick machinery measured ~10x slower for 2 x 64 labels, and a fixed size means
# typing never moves what is below the picture.
DPI = 100
SIDE = 640  # px: A^h's side; at T = 64, 10 px per character still fits an 8-point label
MARGIN = {"left": 64, "bottom": 48, "top": 44, "right": 16, "gap": 56, "bar": 12}
HEAD_WIDTH = 30  # px per head in the write-norm panel
CLEAR_WIN = 1e-3  # a query's strongest key is named when it beats the runner-up by more than this weight


def attention_figure(view: AttentionView) -> Figure:
    """Left: A^h, query characters down, key characters across. Right: the write norm of every
    head of the layer at each query position, the same rows as A^h, the shown head outlined."""
    picture = AttentionPicture(view.write_norms.shape[0])
    picture.relabel(view.labels, float(view.write_norms.max()))
    fig = picture.draw(view)
    fig.set_label(describe_view(view))
    return fig


def describe_view(view: AttentionView) -> str:
    """attention_figure's text alternative: what it shows, and each query's strongest key, or '?'
    where the two largest weights are within CLEAR_WIN (which of them wins is rounding's choice).
    The page labels its A^h with the same words (js/attention.js's describeView, which compares
    in float64 as here; a test holds the two equal)."""
    labels = view.labels
    top = view.A.double().topk(min(2, len(labels)), dim=-1)  # (T, 2): the two largest weights of each query
    margin = top.values[:, 0] - (top.values[:, 1] if len(labels) > 1 else 0)  # (T,)
    strongest = " ".join(f"{labels[t]}→{labels[int(top.indices[t, 0])] if margin[t] > CLEAR_WIN else '?'}"
                         for t in range(len(labels)))
    return (f"Attention pattern A^h of layer {view.layer}, head {view.head} over {len(labels)} "
            f"characters, beside every head's write norm; each query's strongest key (? where the top two "
            f"weights are within {CLEAR_WIN:g}): {strongest}")


class AttentionPicture:
    """attention_figure's Figure, kept by the explorer and changed in place.

    relabel(labels, norm_max) places the characters of a new text; draw(view) swaps the
    heatmaps' data and the titles.
    The write norms' colour scale runs from 0 to `norm_max` (the explorer passes the largest
    norm of every layer, so shades compare across layers and the colour bar stays put).
    """

    def __init__(self, H: int):
        m, self.H = MARGIN, H
        self.x_norms = m["left"] + SIDE + m["bar"] + m["gap"]
        x_norms_bar = self.x_norms + H * HEAD_WIDTH + m["bar"] // 2
        self.width = x_norms_bar + m["bar"] + m["gap"] + m["right"]
        self.height = m["bottom"] + SIDE + m["top"]
        self.top = top = self.height - m["top"]  # pixel row of A^h's top edge
        self.fig = fig = Figure(figsize=(self.width / DPI, self.height / DPI), dpi=DPI)
        self.labels: list = []  # (column label, row label) Text pairs, reused from text to text

        def axes(x, w):  # an axes box in pixels, as tall as A^h, aligned with its rows
            return fig.add_axes((x / self.width, (top - SIDE) / self.height, w / self.width, SIDE / self.height))

        heat, norms = axes(m["left"], SIDE), axes(self.x_norms, H * HEAD_WIDTH)
        for ax in (heat, norms):
            ax.set_axis_off()  # no ticks, no frame: the characters are plain texts placed by relabel
        self.heat = heat.imshow(torch.zeros(1, 1).numpy(), cmap="viridis", vmin=0.0, vmax=1.0,
                                interpolation="nearest", aspect="auto")
        self.norms = norms.imshow(torch.zeros(1, H).numpy(), cmap="Greys", vmin=0.0, vmax=1.0,
                                  interpolation="nearest", aspect="auto")
        fig.colorbar(self.heat, cax=axes(m["left"] + SIDE + m["bar"] // 2, m["bar"]))
        self.norms_bar = axes(x_norms_bar, m["bar"])  # its scale changes with the text
        fig.colorbar(self.norms, cax=self.norms_bar)
        self.outline = norms.add_patch(Rectangle((-0.5, -0.5), 1, 1, fill=False, edgecolor="tab:orange", linewidth=2.5))
        self.head_labels = [self.at(self.x_norms + (h + 0.5) * HEAD_WIDTH, top - SIDE - 3, str(h), fontsize=9,
                                    ha="center", va="top") for h in range(H)]
        self.title = self.at(m["left"], top + 24, "", fontsize=11, va="bottom")
        self.at(m["left"], top + 6, "row t: query t's attention over keys s (sums to 1)", fontsize=9, va="bottom")
        self.at(m["left"] + SIDE / 2, 4, "key position s", fontsize=9, ha="center", va="bottom")
        self.at(4, top - SIDE / 2, "query position t", fontsize=9, rotation=90, va="center")
        self.at(self.x_norms, top + 24, "each head's write", fontsize=11, va="bottom")
        self.at(self.x_norms, top + 6, r"$\|(A^h X W_{OV}^h)_t\|$ at row t", fontsize=9, va="bottom")
        self.at(self.x_norms + H * HEAD_WIDTH / 2, 4, "head h", fontsize=9, ha="center", va="bottom")

    def at(self, x, y, text, **style):
        """A text at pixel (x, y) from the figure's bottom-left corner."""
        return self.fig.text(x / self.width, y / self.height, text, **style)

    def relabel(self, labels: list[str], norm_max: float) -> None:
        """Lay out a new text: T characters along both sides of A^h, T rows in every panel."""
        T, m = len(labels), MARGIN
        cell = SIDE / T
        font = 10 if cell >= 16 else 9 if cell >= 13 else 8
        while len(self.labels) < T:
            self.labels.append((self.at(0, 0, "", ha="center", va="top"), self.at(0, 0, "", ha="right", va="center")))
        for t, (column, row) in enumerate(self.labels):
            centre = (t + 0.5) * cell
            for text in (column, row):
                text.set(visible=t < T, text=labels[t] if t < T else "", fontsize=font)
            column.set_position(((m["left"] + centre) / self.width, (self.top - SIDE - 3) / self.height))
            row.set_position(((m["left"] - 3) / self.width, (self.top - centre) / self.height))
        for image, width in ((self.heat, T), (self.norms, self.H)):
            image.set_extent((-0.5, width - 0.5, T - 0.5, -0.5))
        self.norms.set_clim(0.0, max(norm_max, 1e-12))
        self.outline.set_height(T)

    def draw(self, view: AttentionView) -> Figure:
        """The figure showing `view` (its text as last given to relabel)."""
        self.heat.set_data(view.A.numpy())
        self.norms.set_data(view.write_norms.T.numpy())  # (T, H)
        self.outline.set_x(view.head - 0.5)
        for h, label in enumerate(self.head_labels):
            label.set_fontweight("bold" if h == view.head else "normal")
        self.title.set_text(rf"$A^{{h}}$ for layer {view.layer}, head h = {view.head}")
        return self.fig


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
    # no count above the tolerance: for a matrix of lower rank than its size (S^h) that counts rounding noise
    above = "" if tolerance is None else f", and the rank tolerance {tolerance:.0e} (dashed)"
    counts = "; ".join(f"{name}: {len(sigma)} values, largest {coarse(sigma.max())}" for name, sigma in spectra.items())
    fig.set_label(f"{title}: singular values in descending order on a log scale{above}; {counts}.")
    return fig


class AttentionExplorer(ModelExplorer):
    """Type text, pick a layer and a head, see A^h and every head's write per position.

    Works with any GPT (a trained checkpoint or a seeded random model), in any float dtype,
    and leaves the model's train/eval mode as it was. The model runs once per text (`run`
    keeps every layer's A^h), and the page (js/attention.js) receives all of it in one binary
    message: A (L, H, T, T) and norms (L, H, T) as float32 bytes, with labels and shape.
    Moving the layer or head, hovering and the all-heads view are answered in the page, and so is
    typed text where the page runs the model (gptlib.viz.page_model): the kernel runs it too.
    Traits: text, layer, head (set them from code too). `view` holds the numbers of the layer
    and head shown (None while the text cannot be drawn); .message and .stale as in
    gptlib.viz.explorer.
    CSS classes in the page: gptlib-attn-explorer (the whole), gptlib-attn-text,
    gptlib-attn-layer, gptlib-attn-head, gptlib-attn-message, gptlib-attn-output (A^h),
    gptlib-attn-norms (the write norms), gptlib-head-button (one per head, all heads view).
    """

    module_name = "attention"
    _esm = model_module(module_name)
    what = "A^h and each head's write for a text you type"
    text = traitlets.Unicode().tag(sync=True)
    layer = traitlets.Int(0).tag(sync=True)
    head = traitlets.Int(0).tag(sync=True)
    A = traitlets.Bytes().tag(sync=True)  # float32 (L, H, T, T), C order
    norms = traitlets.Bytes().tag(sync=True)  # float32 (L, H, T)
    labels = traitlets.List(traitlets.Unicode()).tag(sync=True)
    shape = traitlets.List(traitlets.Int(), [0, 0, 0]).tag(sync=True)  # [L, H, T] of A

    def __init__(self, model: GPT, text: str = "ROMEO:\nBut soft, what light through yonder window?"):
        if not isinstance(model, GPT):
            raise ValueError(f"model must be a gptlib GPT, got {type(model).__name__}")
        self.model = model
        self.run: AttentionRun | None = None
        self.view: AttentionView | None = None
        self.shown: AttentionView | None = None  # the last view drawn: what the static copy shows
        self.picture = AttentionPicture(model.config.H)  # the kernel's PNG, for the static copy
        super().__init__(text=text)
        self.send_weights(model)
        self.answer_typing(self.rerun)
        self.observe(self.redraw, names=["layer", "head"])
        self.rerun()

    def rerun(self, _change=None) -> None:
        """Run the model on the new text and send every layer's numbers; unreadable text keeps the last ones."""
        try:
            self.run = attention_run(self.model, self.text)
        except ValueError as error:
            self.run = self.view = None
            self.refuse(str(error))
            return
        with self.hold_sync():  # one message to the page (answer_typing holds it till the end too)
            self.A = self.run.A.contiguous().numpy().tobytes()
            self.norms = self.run.write_norms.contiguous().numpy().tobytes()
            self.labels = self.run.labels
            self.shape = list(self.run.A.shape[:3])
        self.redraw()

    def redraw(self, _change=None) -> None:
        """The numbers of the chosen layer and head from the stored run."""
        if self.run is None:
            return  # the text is still unreadable: its message stays
        try:
            self.view = self.run.view(self.layer, self.head)
        except ValueError as error:
            self.view = None
            self.refuse(str(error))
            return
        self.shown = self.view
        self.show(f"{len(self.view.labels)} characters, layer {self.view.layer}, head {self.view.head}")

    def static_png(self) -> bytes:
        """The last drawn layer and head; its write norms on that layer's own scale, as in the page."""
        self.picture.relabel(self.shown.labels, float(self.shown.write_norms.max()))
        return render_png(self.picture.draw(self.shown))

    def alt_text(self) -> str:
        return describe_view(self.shown)
