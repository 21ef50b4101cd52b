"""Theorem 5.2 explorer widget, and the figure of Project aside 5.2's variance over the 2L residual writes."""

from __future__ import annotations

import html

import ipywidgets as widgets
import torch
from matplotlib.figure import Figure

from ..config import COURSE_CONFIG, GPTConfig
from ..counting import component_table, format_table, theorem_5_2
from ..model import GPT
from .display import show_figure


class ParameterCountExplorer(widgets.VBox):
    """Theorem 5.2 for any (V, T_max, d, H, L, tying), measured on a meta-device model.

    The model is built on torch.device("meta"), which allocates no memory, so GPT-3-sized
    configurations count instantly. After each change: `config` (or None), `rows` (the
    component table from named_parameters), `closed_form` (theorem_5_2), `message` (text).

    CSS classes: gptlib-count-V, gptlib-count-Tmax, gptlib-count-d, gptlib-count-H,
    gptlib-count-L, gptlib-count-tie (controls), gptlib-count-message (status line),
    gptlib-count-output (table and figure).
    """

    LIMITS = {"V": 10**6, "T_max": 10**6, "d": 2**16, "H": 2**10, "L": 2**10}

    def __init__(self, config: GPTConfig = COURSE_CONFIG):
        css = {"V": "V", "T_max": "Tmax", "d": "d", "H": "H", "L": "L"}
        self.controls = {}
        for name, limit in self.LIMITS.items():
            box = widgets.BoundedIntText(value=getattr(config, name), min=1, max=limit, description=name)
            box.add_class(f"gptlib-count-{css[name]}")
            self.controls[name] = box
            setattr(self, name, box)  # explorer.V, explorer.T_max, ... are the text boxes
        self.tie = widgets.Checkbox(value=config.tie_weights, description="tie W_U = E^T")
        self.tie.add_class("gptlib-count-tie")
        self.status = widgets.HTML()
        self.status.add_class("gptlib-count-message")
        self.output = widgets.Output()
        self.output.add_class("gptlib-count-output")
        for control in (*self.controls.values(), self.tie):
            control.observe(self.update, names="value")
        super().__init__([widgets.HBox(list(self.controls.values())), self.tie, self.status, self.output])
        self.update()

    def update(self, _change=None) -> None:
        self.output.clear_output()
        sizes = {name: box.value for name, box in self.controls.items()}
        try:
            self.config = GPTConfig(**sizes, tie_weights=self.tie.value)
        except ValueError as error:
            self.config, self.rows, self.closed_form = None, None, None
            self._say(f"Invalid configuration: {error}", error=True)
            return
        with torch.device("meta"):
            model = GPT(self.config)  # shapes only, no memory
        self.rows = component_table(model)
        self.closed_form = theorem_5_2(self.config)
        measured = self.rows[-1].parameters
        L, d = self.config.L, self.config.d
        agree = "equals" if measured == self.closed_form else "DIFFERS FROM"
        self._say(
            f"measured {measured:,} {agree} Theorem 5.2's {self.closed_form:,}; "
            f"leading 12Ld^2 = {12 * L * d * d:,} ({12 * L * d * d / measured:.1%}), "
            f"10Ld = {10 * L * d:,} ({10 * L * d / measured:.2%})",
            error=measured != self.closed_form,
        )
        with self.output:
            print(format_table(self.rows))
            show_figure(share_figure(self.rows))

    def _say(self, text: str, error: bool = False) -> None:
        self.message = text
        colour = "#b00020" if error else "inherit"
        self.status.value = f'<span style="color:{colour}">{html.escape(text)}</span>'


def share_figure(rows) -> Figure:
    """Horizontal bars: each component's share of the total (rows from counting.component_table)."""
    parts = rows[:-1]
    fig = Figure(figsize=(6, 2.2))
    ax = fig.add_subplot()
    ax.barh([row.component for row in parts][::-1], [100 * row.share for row in parts][::-1], color="#4c72b0")
    ax.set_xlabel("share of all parameters (%)")
    ax.set_xlim(0, 100)
    fig.tight_layout()
    return fig


def init_variance_figure(L_values, scaled: list[dict], unscaled: list[dict]) -> Figure:
    """Accumulated write variance against L, with and without 1/sqrt(2L) (from gptlib.residual.residual_write_variance)."""
    fig = Figure(figsize=(6.5, 3.6))
    ax = fig.add_subplot()
    for runs, label, colour in ((unscaled, "W_O, W_2 std 0.02", "#c44e52"), (scaled, "W_O, W_2 std 0.02/sqrt(2L)", "#4c72b0")):
        ax.plot(L_values, [run["accumulated"] for run in runs], "o", color=colour, label=f"{label}: measured Var(X^(L) - X^(0))")
        ax.plot(L_values, [run["independent"] for run in runs], "-", color=colour, alpha=0.6, label=f"{label}: sum of write variances")
    v = unscaled[0]["accumulated"] / 2  # one unscaled write's variance, from L = 1's two writes
    ax.plot(L_values, [2 * L * v for L in L_values], "--", color="#c44e52", lw=1, label="idealized 2L v")
    ax.plot(L_values, [v for _ in L_values], "--", color="#4c72b0", lw=1, label="idealized 2L (v / 2L) = v")
    ax.set_yscale("log")
    ax.set_xlabel("number of blocks L (2L residual writes)")
    ax.set_ylabel("variance per coordinate")
    ax.legend(fontsize=7)
    ax.set_title(f"grows ~2L unscaled, stays ~flat scaled (ratio at L={L_values[-1]}: "
                 f"{unscaled[-1]['accumulated'] / scaled[-1]['accumulated']:.1f})", fontsize=9)
    fig.tight_layout()
    return fig
