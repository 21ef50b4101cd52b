"""Theorem 5.2: the parameter-count explorer widget and its figure.

    whole_number(name, typed)     a size typed by the learner, exactly, or a ValueError saying why not
    ParameterCountExplorer()      the widget: sizes -> meta-device model -> table, shares, closed form
    CountPicture().draw(rows, config)   that table beside bars of each component's share
"""

from __future__ import annotations

import ipywidgets as widgets
import torch
from matplotlib.figure import Figure

from .. import checks
from ..config import COURSE_CONFIG, GPTConfig
from ..counting import COMPONENTS, component_table, format_table, theorem_5_2
from ..model import GPT
from .display import render_png
from .explorer import Explorer, typed_number

SIZES = ("V", "T_max", "d", "H", "L")
MAX_L = 10_000  # blocks: a meta-device model is built block by block, and GPT-3 has 96


def whole_number(name: str, typed: str) -> int:
    """What the learner typed into a size box, as an int, or a ValueError saying why it is not one.

    Accepts digits with optional thousands separators ("50,257", "50_257") and whole numbers in
    scientific notation ("1e3"); refuses fractions ("12.5") and non-numbers, never rounding.
    Whether the number is a valid size (positive, H divides d, ...) is GPTConfig's rule.
    """
    value = typed_number(name, typed, separators=",_")
    if value != value.to_integral_value():
        raise ValueError(f"{name}: {typed.strip()} is not a whole number")
    return int(value)


class ParameterCountExplorer(Explorer):
    """Theorem 5.2 for any (V, T_max, d, H, L, tying), measured on a meta-device model.

    The model is built on torch.device("meta"), which allocates no memory, so GPT-3-sized
    configurations count instantly. Every other field of the config it is given (attn_only,
    d_ff, norm, ...) is kept. The sizes are text boxes read by whole_number: what the learner
    typed is used exactly or refused with the reason, never rounded or clamped.
    After each change: `config` (or None), `rows` (the component table from named_parameters),
    `closed_form` (theorem_5_2); `.message`, `.status`, `.image` as in gptlib.viz.explorer.

    CSS classes: gptlib-count-V, gptlib-count-Tmax, gptlib-count-d, gptlib-count-H,
    gptlib-count-L, gptlib-count-tie (controls), gptlib-count-message (status line),
    gptlib-count-output (the picture: table and shares).
    """

    what = "Theorem 5.2's parameter count for sizes you type"

    def __init__(self, config: GPTConfig = COURSE_CONFIG):
        self.base = config
        self.controls = {}
        for name in SIZES:
            box = widgets.Text(value=f"{getattr(config, name)}", description=name, continuous_update=False,
                               layout=widgets.Layout(width="15em"), style={"description_width": "3.5em"})
            box.add_class(f"gptlib-count-{name.replace('_', '')}")
            self.controls[name] = box
            setattr(self, name, box)  # explorer.V, explorer.T_max, ... are the text boxes
        self.tie = widgets.Checkbox(value=config.tie_weights, description="tie W_U = E^T")
        self.tie.add_class("gptlib-count-tie")
        self.config: GPTConfig | None = None
        self.rows = self.closed_form = None
        self.picture = CountPicture()
        for control in (*self.controls.values(), self.tie):
            control.observe(self.update, names="value")
        super().__init__([widgets.HBox(list(self.controls.values())), self.tie], css="count")
        self.add_class("gptlib-count")
        self.update()

    def update(self, _change=None) -> None:
        try:
            sizes = {name: whole_number(name, box.value) for name, box in self.controls.items()}
            checks.integer("L", sizes["L"], at_most=MAX_L)
            config = self.base.replace(**sizes, tie_weights=self.tie.value)
            with torch.device("meta"):
                model = GPT(config)  # shapes only, no memory
        except (ValueError, RuntimeError) as error:  # RuntimeError: a size too large for torch's int64 shapes
            self.config, self.rows, self.closed_form = None, None, None
            self.refuse(f"invalid configuration: {error}")
            return
        self.config = config
        self.rows = component_table(model)
        self.closed_form = theorem_5_2(config)
        measured = self.rows[-1].parameters
        L, d = config.L, config.d
        agree = "equals" if measured == self.closed_form else "DIFFERS FROM"
        self.show(
            render_png(self.picture.draw(self.rows, config)),
            f"measured {measured:,} {agree} Theorem 5.2's {self.closed_form:,}; "
            f"leading 12Ld^2 = {12 * L * d * d:,} ({12 * L * d * d / measured:.1%}), "
            f"10Ld = {10 * L * d:,} ({10 * L * d / measured:.2%})",
        )


class CountPicture:
    """The component table (rows from counting.component_table) as text beside horizontal bars of
    each component's share: one Figure at a fixed size, kept by the explorer and redrawn in place."""

    def __init__(self):
        self.fig = Figure(figsize=(10.0, 2.4), dpi=100)
        self.table = self.fig.text(0.01, 0.95, "", family="monospace", fontsize=9, va="top")
        self.sizes = self.fig.text(0.01, 0.04, "", fontsize=8, color="dimgray")
        ax = self.fig.add_axes((0.7, 0.22, 0.24, 0.72))
        n = len(COMPONENTS)
        self.bars = ax.barh(range(n), [0.0] * n, color="#4c72b0").patches  # bottom bar = last component
        self.shares = [ax.text(0.0, i, "", va="center", fontsize=8) for i in range(n)]
        names = [name.split(" in ")[0].replace(" and positional", " + P") for name, _ in COMPONENTS]
        ax.set_yticks(range(n), names[::-1], fontsize=8)
        ax.set_xlim(0, 100)
        ax.set_xlabel("share of all parameters (%)", fontsize=8)
        ax.tick_params(labelsize=8)

    def draw(self, rows, config: GPTConfig) -> Figure:
        parts = rows[:-1][::-1]  # the bars run bottom-up
        self.table.set_text(format_table(rows))
        switches = [name for name in ("tie_weights", "attn_only") if getattr(config, name)]
        self.sizes.set_text(f"V={config.V:,}  T_max={config.T_max:,}  d={config.d:,}  H={config.H:,}  L={config.L:,}  "
                            f"d_ff={config.d_ff:,}" + "".join(f"  {name}" for name in switches))
        for bar, share, row in zip(self.bars, self.shares, parts):
            bar.set_width(100 * row.share)
            share.set(x=100 * row.share + 1, text=f"{row.share:.1%}")
        return self.fig
