"""What the four explorers share: a front end that draws in the page, fed by the kernel.

Every explorer (AttentionExplorer, LayerNormSphere, ParameterCountExplorer, StreamExplorer) is an anywidget:
its controls and its picture are drawn by a small ES module of its own (gptlib/viz/js/, with
common.js in front), so moving a control redraws without a kernel round trip. The kernel
holds the same values as traits, checks them, and answers with what only it can compute.
Each has
    .message   str: the kernel's status line ("Cannot draw: ..." while the input cannot be drawn)
    .stale     bool: True while the picture shows the last valid input, not the current one
and behaves the same way:
  - input it cannot draw keeps the last good picture, greyed out, under a message saying why;
  - its display is one output holding it twice (_repr_mimebundle_): the live widget, and a
    static copy, an HTML page fragment that runs the same module on the values last drawn
    (alive in the book and in a saved HTML page, without a kernel) with that picture as a PNG
    and its alt text inside for viewers without JavaScript. Each front end renders the one form
    it can, so an explorer is shown once wherever it is opened: a front end with a widget
    manager (JupyterLab, Notebook 7, Voila; VS Code and Colab read the same bundle) the widget,
    one without (nbconvert's HTML, GitHub, the book, an untrusted notebook) the static copy;
  - a second output (FROM_STATE, _ipython_display_) shows nothing, except in a page that holds
    widget state (nbconvert's HTML of a notebook executed, `--execute` stores the state by
    default, or saved with it; nbviewer): there nbconvert picks the widget view, drawn only by a
    renderer fetched from a CDN, and this output's script draws the explorer from the state
    stored for it instead, with the same module, until a renderer draws the view. (`make
    notebooks` stores no widget state: the book and plain nbconvert show the static copy.);
  - its text repr says in one line what it is and to run the cell;
  - a value set from code or sent by a page is checked when it is set: a number trait (Real)
    takes only a finite real number, never a bool or NaN, and a switch (Switch) only True or
    False, or a ValueError names the rule and nothing changes or reaches the page.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from pathlib import Path

import anywidget
import traitlets

from .. import validation

JS = Path(__file__).with_name("js")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
SHOWN_CHARACTERS = 24  # typed text longer than this is shortened in messages, so a line never grows


def shown(typed: str) -> str:
    """Typed text as a message quotes it: stripped, and shortened when long ('1234567890…(400 characters)')."""
    text = typed.strip()
    return text if len(text) <= SHOWN_CHARACTERS else f"{text[:12]}…({len(text)} characters)"


class Refused(traitlets.TraitError, ValueError):
    """A value a trait's rule refuses: a ValueError to whoever set it, and to traitlets a TraitError, on
    which it rolls back every value of the same message from the page (hold_trait_notifications)."""


class Checked:
    """A synced trait whose every value passes `rule(label, value)`, a gptlib.validation function: what it
    refuses raises Refused (a ValueError) where it is set (from code, or sent by a page) and never reaches
    the page. Subclasses name the rule (`rule = staticmethod(validation.real)`) or override check(obj, value)."""

    def __init__(self, default, label: str):
        super().__init__(default)
        self.label = label
        self.tag(sync=True)

    def check(self, obj, value):
        return self.rule(self.label, value)

    def validate(self, obj, value):
        try:
            return self.check(obj, value)
        except ValueError as error:
            raise Refused(str(error)) from None


class Real(Checked, traitlets.Float):
    """A number: only a finite real number, never a bool, NaN or inf (JSON has no NaN)."""

    rule = staticmethod(validation.real)


class Switch(Checked, traitlets.Bool):
    """A switch: only True or False, never 1 or "False"."""

    rule = staticmethod(validation.boolean)


class Whole(Checked, traitlets.Int):
    """A whole number in [at_least, bound(explorer)] (no upper bound where bound gives None), never a bool,
    float or NaN."""

    def __init__(self, label: str, bound, at_least: int = 0):
        super().__init__(at_least, label)
        self.bound, self.at_least = bound, at_least

    def check(self, obj, value) -> int:
        return validation.integer(self.label, value, at_least=self.at_least, at_most=self.bound(obj))


class OneOf(Checked, traitlets.Unicode):
    """One of `choices` (the first by default)."""

    def __init__(self, label: str, choices: tuple[str, ...]):
        super().__init__(choices[0], label)
        self.choices = choices

    def check(self, obj, value) -> str:
        if not isinstance(value, str) or value not in self.choices:
            raise ValueError(f"{self.label} must be one of {', '.join(self.choices)}, got {value!r}")
        return value


def script_json(value) -> str:
    """value as JSON that can sit inside an HTML <script>: every '<', '>' and '&' written as a
    \\u escape, so no text in it ('</script>', '<!--<script>') can end or re-enter the script
    early (NaN and infinities are refused: JSON has none)."""
    text = json.dumps(value, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


# The loader of every saved copy (js/static.js), and the explorer's second output: a script that draws
# the copy from a page's stored widget state where that page shows the widget view (js/from_state.js).
STATIC_JS = (JS / "static.js").read_text()
FROM_STATE = {"text/html": f'<div class="gptlib-from-state"><script>(() => {{\n{STATIC_JS}\n'
                           f'{(JS / "from_state.js").read_text()}}})();</script></div>',
              "text/plain": ""}


def module(name: str) -> str:
    """The ES module of one explorer: common.js, then js/<name>.js."""
    return (JS / "common.js").read_text() + "\n" + (JS / f"{name}.js").read_text()


class Explorer(anywidget.AnyWidget):
    """Base class. Subclasses set `_esm` (module(name)), `what` (a few words for the repr),
    implement static_png() and alt_text(), and call show(message) after input they could use
    or refuse(reason) for input they cannot. One whose kernel runs a typed `text` wires it with
    answer_typing(rerun)."""

    _css = (JS / "explorer.css").read_text()
    message = traitlets.Unicode("").tag(sync=True)
    stale = traitlets.Bool(False).tag(sync=True)
    live = traitlets.Bool(True).tag(sync=True)  # False in a static copy: no kernel answers there
    # the page's number of the text it sent last, and the number the kernel's last run answered
    # (js/common.js's sendTyped: one text in flight, sent at every keystroke)
    typed = traitlets.Int(0).tag(sync=True)
    answered = traitlets.Int(0).tag(sync=True)
    what = "an interactive figure"
    drawn = False  # whether any input could be drawn yet
    last_drawn: dict | None = None  # the synced values when show() was last called: what a static copy shows

    def answer_typing(self, rerun) -> None:
        """Call rerun() when `text` changes, set from code or typed in the page: once per text and
        number the page sent (the same text sent again, after a keystroke and its undo, is answered
        too), everything it changes sent in one message with `answered` set to that number, which
        lets the page send its next text."""
        ran_for = None

        def answer(_change=None) -> None:
            nonlocal ran_for
            if (self.text, self.typed) == ran_for:
                return  # text and number arrived in one message: one run answers both
            ran_for = self.text, self.typed
            with self.hold_sync():
                rerun()
                self.answered = self.typed

        self.observe(answer, names=["text", "typed"])

    def show(self, message: str) -> None:
        """The current input is drawn; say what it shows."""
        self.drawn = True
        self.stale = False
        self.message = message
        self.last_drawn = self.synced()

    def refuse(self, reason: str) -> None:
        """Keep the last picture, greyed out, under a message that says why nothing new was drawn."""
        shown_now = "the picture still shows the last valid input" if self.drawn else "nothing is drawn"
        self.message = f"Cannot draw: {reason} ({shown_now})."
        self.stale = True

    def static_png(self) -> bytes:
        """The current picture as PNG bytes, drawn by the kernel (for viewers without JavaScript)."""
        raise NotImplementedError

    def alt_text(self) -> str:
        """What the current picture shows, in words."""
        raise NotImplementedError

    def synced(self) -> dict:
        """The explorer's own synced values as they are now (not ipywidgets' layout, ...)."""
        return {name: getattr(self, name) for name, trait in self.traits(sync=True).items()
                if not name.startswith("_") and issubclass(trait.this_class, Explorer)}

    def state(self) -> dict:
        """The values a static copy runs on: those of the last input drawn (after a refusal too,
        so it never shows the defaults or a greyed picture), bytes as {"base64": ...}."""
        values = dict(self.last_drawn or self.synced())
        for name, value in values.items():
            if isinstance(value, (bytes, memoryview)):
                values[name] = {"base64": base64.b64encode(bytes(value)).decode("ascii")}
        return values | {"live": False}

    def saved_module(self) -> str:
        """The module a static copy runs: the widget's own."""
        return self._esm

    def static_html(self, png: bytes) -> str:
        """A self-contained copy of the explorer: the module run on the saved values, with the
        kernel's picture `png` (and its alt text) in place until the module has drawn."""
        png = base64.b64encode(png).decode("ascii")
        state = script_json(self.state())
        key = "gptlib-" + hashlib.sha256((self.saved_module() + state).encode()).hexdigest()[:16]
        script = (f"{STATIC_JS}\nconst host = document.getElementById({script_json(key)});\n"
                  f"if (host) await showSaved(host, {script_json(self.saved_module())}, {state});")
        return (f'<div id="{key}" class="gptlib-static"><style>{self._css}</style>'
                f'<img alt="{html.escape(self.alt_text())}" src="data:image/png;base64,{png}">'
                f'<script type="module">{script}</script></div>')

    def __repr__(self) -> str:
        return f"{type(self).__name__}, {self.what}: run this cell in Jupyter to use it"

    def _repr_mimebundle_(self, **kwargs) -> tuple[dict, dict]:
        """The explorer as one display output: the live widget first, then the static copy (once
        anything could be drawn), then the text repr, most capable first as front ends read it."""
        data, metadata = super()._repr_mimebundle_(**kwargs)  # anywidget: the widget view and the repr
        bundle = {WIDGET_VIEW: data[WIDGET_VIEW]}
        if self.drawn:  # else the live explorer says why nothing is drawn, and there is nothing to copy
            bundle["text/html"] = self.static_html(self.static_png())
        bundle["text/plain"] = data["text/plain"]
        return bundle, metadata

    def _ipython_display_(self) -> None:
        """The explorer as two display outputs: its bundle (_repr_mimebundle_), then FROM_STATE, which
        draws its static copy in a page that chose the widget view from stored widget state."""
        from IPython.display import display

        data, metadata = self._repr_mimebundle_()
        display(data, metadata=metadata, raw=True)
        display(FROM_STATE, raw=True)
