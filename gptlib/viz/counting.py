"""Theorem 5.2: the parameter-count explorer widget and its figure.

    whole_number(name, typed)     a size typed by the learner, exactly, or a ValueError saying why not
    ParameterCountExplorer()      the explorer: Theorem 5.2 in the page (js/counting.js), measured in the kernel
    CountPicture().draw(rows, config)   that table beside bars of each component's share
"""

from __future__ import annotations

import re
import reprlib

import torch
import traitlets
from matplotlib.figure import Figure

from .. import validation
from ..analysis.counting import COMPONENTS, component_table, format_table, theorem_5_2
from ..config import COURSE_CONFIG, GPTConfig
from ..model import GPT
from .display import render_png
from .explorer import Explorer, Switch, module, shown

SIZES = ("V", "T_max", "d", "H", "L")
MAX_L = 10_000  # blocks: a meta-device model is built block by block, and GPT-3 has 96
MAX_SIZE = 2**63 - 1  # every size must fit torch's int64 shapes
MAX_DIGITS = 400  # whole_number refuses longer numbers before making them ints
# A decimal as a size box reads it (js/counting.js's wholeNumber has the same): sign, whole digits,
# fraction digits, exponent. ASCII digits only ([0-9], not \d, which takes every script's digits).
DECIMAL = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?[0-9]+))?")
NOT_FINITE = re.compile(r"[+-]?(inf|infinity|nan|snan)", re.IGNORECASE)


def whole_number(name: str, typed: str, at_most: int = MAX_SIZE) -> int:
    """What the learner typed into the size box `name`, as an int, or a ValueError saying why it is not one.

    Accepts digits with optional thousands separators ("50,257", "50_257") and whole numbers in
    scientific notation ("1e3", "0e500" is 0); refuses fractions ("12.5"), non-numbers, numbers
    of more than MAX_DIGITS digits (named with the bound of a size, [1, at_most]: int() of
    "1e999999999" would build a billion digits) and anything that is not text, never rounding. Whether the number is a valid size
    (positive, H divides d, ...) is GPTConfig's rule. Long text is quoted shortened (see shown).
    """
    if not isinstance(typed, str):
        raise ValueError(f"{name}: a size box holds text (a str), got {reprlib.repr(typed)}")
    plain = typed.strip().replace(",", "").replace("_", "")
    match = DECIMAL.fullmatch(plain)
    if not match or not match[2] + (match[3] or ""):
        finite = "finite " if NOT_FINITE.fullmatch(plain) else ""
        raise ValueError(f"{name}: {shown(typed)!r} is not a {finite}number")
    sign, whole, fraction, power = match[1], match[2], match[3] or "", match[4] or "0"
    digits = (whole + fraction).lstrip("0")
    if not digits:
        return 0
    # an exponent of more than 20 digits is beyond any size either way (and int() of 5,000 digits is refused)
    exponent = (int(power) if len(power) <= 20 else -(10**20) if power.startswith("-") else 10**20) - len(fraction)
    if exponent < 0:
        kept = max(len(digits) + exponent, 0)
        if digits[kept:].strip("0"):
            raise ValueError(f"{name}: {shown(typed)} is not a whole number")
        digits = digits[:kept] or "0"
    elif len(digits) + exponent > MAX_DIGITS:
        raise ValueError(f"{name} must be an integer in [1, {at_most}], got {shown(typed)} (more than {MAX_DIGITS} digits)")
    else:
        digits += "0" * exponent
    return -int(digits) if sign == "-" else int(digits)


class ParameterCountExplorer(Explorer):
    """Theorem 5.2 for any (V, T_max, d, H, L, tying), evaluated in the page, measured in the kernel.

    Drawn by js/counting.js: every typed size evaluates Theorem 5.2 in the page, exactly and per
    component, and sends what was typed to the kernel, which builds the model on
    torch.device("meta") (no memory, so GPT-3 sizes count too), sums its named_parameters
    and answers with the measured count in .message. Every other field of the config it is
    given (attn_only, d_ff, norm, ...) is kept. What was typed is read by whole_number: used
    exactly or refused with the reason, never rounded or clamped.
    Traits: typed (dict size name -> the text in its box; set it from code with type_in; a box
    that holds no text is refused in .message like bad text), tie (W_U = E^T: True or False, a
    ValueError otherwise), answered (the typed/tie the kernel's .message is about).
    After each change: `config` (or None), `rows` (the component table from named_parameters),
    `closed_form` (theorem_5_2); .message and .stale as in gptlib.viz.explorer.

    CSS classes in the page: gptlib-count (the whole), gptlib-count-V, gptlib-count-Tmax,
    gptlib-count-d, gptlib-count-H, gptlib-count-L, gptlib-count-tie (controls),
    gptlib-count-output (the table), gptlib-count-theorem (the closed form's line),
    gptlib-count-message (the kernel's line).
    """

    _esm = module("counting")
    what = "Theorem 5.2's parameter count for sizes you type"
    typed = traitlets.Dict().tag(sync=True)
    tie = Switch(False, "tie")
    answered = traitlets.Dict().tag(sync=True)
    attn_only = traitlets.Bool(False).tag(sync=True)  # read by the page's Theorem 5.2
    d_ff = traitlets.Int(0).tag(sync=True)  # 0: d_ff = 4d follows d; otherwise the config's fixed d_ff

    def __init__(self, config: GPTConfig = COURSE_CONFIG):
        if not isinstance(config, GPTConfig):
            raise ValueError(f"config must be a GPTConfig, got {config!r}")
        self.base = config
        self.config: GPTConfig | None = None
        self.last_config = config  # the last config counted: what the static copy shows
        self.rows = self.closed_form = None
        super().__init__(typed={name: f"{getattr(config, name)}" for name in SIZES}, tie=config.tie_weights,
                         attn_only=config.attn_only, d_ff=0 if config.d_ff == 4 * config.d else config.d_ff)
        self.observe(self.update, names=["typed", "tie"])
        self.update()

    def type_in(self, name: str, text: str) -> None:
        """Type `text` into the box of size `name` (V, T_max, d, H or L), as the learner would."""
        if name not in SIZES:
            raise ValueError(f"name must be one of {SIZES}, got {name!r}")
        if not isinstance(text, str):
            raise ValueError(f"{name}: a size box holds text (a str), got {reprlib.repr(text)}")
        self.typed = {**self.typed, name: text}

    def update(self, _change=None) -> None:
        try:
            limits = {name: MAX_L if name == "L" else MAX_SIZE for name in SIZES}
            sizes = {name: whole_number(name, self.typed.get(name, ""), limits[name]) for name in SIZES}
            for name, value in sizes.items():
                limit = limits[name]
                if value > limit:  # quoted as typed, shortened: a 400-digit number is not echoed in full
                    raise ValueError(f"{name} must be an integer <= {limit}, got {shown(self.typed[name])}")
                validation.integer(name, value, at_least=1)
            config = self.base.replace(**sizes, tie_weights=self.tie)
            with torch.device("meta"):
                model = GPT(config)  # shapes only, no memory
        except (ValueError, RuntimeError) as error:  # RuntimeError: a product of sizes too large for torch's int64
            self.config, self.rows, self.closed_form = None, None, None
            self.refuse(f"invalid configuration: {error}")
        else:
            self.config = self.last_config = config
            self.rows = component_table(model)
            self.closed_form = theorem_5_2(config)
            measured = self.rows[-1].parameters
            L, d = config.L, config.d
            agree = "equals" if measured == self.closed_form else "DIFFERS FROM"
            self.show(
                f"measured {measured:,} {agree} Theorem 5.2's {self.closed_form:,}; "
                f"leading 12Ld^2 = {12 * L * d * d:,} ({12 * L * d * d / measured:.1%}), "
                f"10Ld = {10 * L * d:,} ({10 * L * d / measured:.2%})",
            )
        self.answered = {"typed": dict(self.typed), "tie": self.tie}

    def static_png(self) -> bytes:
        config = self.last_config
        with torch.device("meta"):
            rows = component_table(GPT(config))
        return render_png(CountPicture().draw(rows, config))

    def alt_text(self) -> str:
        config = self.last_config
        return (f"Parameter table for V={config.V:,}, T_max={config.T_max:,}, d={config.d:,}, H={config.H:,}, "
                f"L={config.L:,}: {theorem_5_2(config):,} parameters in all, with each component's share as bars.")


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
        ax.set_ylabel("component", fontsize=8)
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
