"""What the three explorers share: a front end that draws in the page, fed by the kernel.

Every explorer (AttentionExplorer, LayerNormSphere, ParameterCountExplorer) is an anywidget:
its controls and its picture are drawn by a small ES module of its own (gptlib/viz/js/, with
common.js in front), so moving a control redraws without a kernel round trip. The kernel
holds the same values as traits, checks them, and answers with what only it can compute.
Each has
    .message   str: the kernel's status line ("Cannot draw: ..." while the input cannot be drawn)
    .stale     bool: True while the picture shows the last valid input, not the current one
and behaves the same way:
  - input it cannot draw keeps the last good picture, greyed out, under a message saying why;
  - displaying it first leaves a static copy: an HTML output that runs the same module on the
    saved values (alive in the book and in a saved HTML page, without a kernel), with the
    first picture as a PNG inside it for viewers without JavaScript, and the PNG alone as well;
    in a live page the explorer's CSS hides that copy, so nothing is shown twice;
  - its text repr says in one line what it is and to run the cell.
What the learner types into a box is read by typed_number, and its range checked by
gptlib.checks, so every box refuses bad text in the same words (the front ends say the same).
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from decimal import Decimal, InvalidOperation
from pathlib import Path

import anywidget
import traitlets

from .display import image_output

JS = Path(__file__).with_name("js")
SHOWN_CHARACTERS = 24  # typed text longer than this is shortened in messages, so a line never grows


def shown(typed: str) -> str:
    """Typed text as a message quotes it: stripped, and shortened when long ('1234567890…(400 characters)')."""
    text = typed.strip()
    return text if len(text) <= SHOWN_CHARACTERS else f"{text[:12]}…({len(text)} characters)"


def typed_number(name: str, typed: str, separators: str = "") -> Decimal:
    """What the learner typed into the box `name`, exactly, or a ValueError saying why it is not a finite number.

    Spaces around the text and every character of `separators` (e.g. ",_" between thousands)
    are ignored; "1e3" and "-0.35" are read exactly, never rounded. Whether the number is in
    range is for gptlib.checks to say. Long text is quoted shortened (see shown).
    """
    text = typed.strip()
    for mark in separators:
        text = text.replace(mark, "")
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise ValueError(f"{name}: {shown(typed)!r} is not a number") from None
    if not value.is_finite():
        raise ValueError(f"{name}: {shown(typed)!r} is not a finite number")
    return value


def module(name: str) -> str:
    """The ES module of one explorer: common.js, then js/<name>.js."""
    return (JS / "common.js").read_text() + "\n" + (JS / f"{name}.js").read_text()


class Explorer(anywidget.AnyWidget):
    """Base class. Subclasses set `_esm` (module(name)), `what` (a few words for the repr),
    implement static_png() and alt_text(), and call show(message) after input they could use
    or refuse(reason) for input they cannot."""

    _css = (JS / "explorer.css").read_text()
    message = traitlets.Unicode("").tag(sync=True)
    stale = traitlets.Bool(False).tag(sync=True)
    live = traitlets.Bool(True).tag(sync=True)  # False in a static copy: no kernel answers there
    what = "an interactive figure"
    drawn = False  # whether any input could be drawn yet

    def show(self, message: str) -> None:
        """The current input is drawn; say what it shows."""
        self.drawn = True
        self.stale = False
        self.message = message

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

    def state(self) -> dict:
        """The synced values the front end reads, bytes as {"base64": ...}, for a static copy."""
        values = {}
        for name, trait in self.traits(sync=True).items():
            if name.startswith("_") or not issubclass(trait.this_class, Explorer):  # ipywidgets' own: layout, ...
                continue
            value = getattr(self, name)
            if isinstance(value, (bytes, memoryview)):
                value = {"base64": base64.b64encode(bytes(value)).decode("ascii")}
            values[name] = value
        return values | {"live": False}

    def static_html(self, png: bytes) -> str:
        """A self-contained copy of the explorer: the module run on the saved values, with the
        kernel's picture `png` (and its alt text) in place until the module has drawn."""
        png = base64.b64encode(png).decode("ascii")
        state = json.dumps(self.state(), separators=(",", ":"))
        key = "gptlib-" + hashlib.sha256((self._esm + state).encode()).hexdigest()[:16]
        script = STANDALONE.replace("KEY", json.dumps(key)).replace("SOURCE", json.dumps(self._esm))
        script = script.replace("STATE", state).replace("</", "<\\/")  # no early </script>
        return (f'<div id="{key}" class="gptlib-static"><style>{self._css}</style>'
                f'<img alt="{html.escape(self.alt_text())}" src="data:image/png;base64,{png}">'
                f'<script type="module">{script}</script></div>')

    def __repr__(self) -> str:
        return f"{type(self).__name__}, {self.what}: run this cell in Jupyter to use it"

    def _ipython_display_(self) -> None:
        from IPython.display import display

        if self.drawn:  # else nothing could be drawn yet, and the live explorer says why
            png = self.static_png()
            static, metadata = image_output(png, self.alt_text())
            static |= {"text/html": self.static_html(png),
                       "text/plain": f"[the first picture of the {type(self).__name__} below]"}
            display(static, metadata=metadata, raw=True)
        bundle = self._repr_mimebundle_()  # the live widget: anywidget gives (data, metadata)
        data, metadata = bundle if isinstance(bundle, tuple) else (bundle, {})
        display(data, metadata=metadata, raw=True)


# The static copy's loader: the module from a Blob URL, rendered with a model that keeps its
# values in the page (what a widget model does, without a kernel to tell).
STANDALONE = """
const host = document.getElementById(KEY);
if (host) {
  const values = STATE;
  for (const [name, value] of Object.entries(values)) {
    if (value && typeof value === "object" && "base64" in value) {
      const bytes = Uint8Array.from(atob(value.base64), (c) => c.charCodeAt(0));
      values[name] = new DataView(bytes.buffer);
    }
  }
  const listeners = [];
  const model = {
    get: (name) => values[name],
    set: (name, value) => { values[name] = value; for (const [event, f] of listeners) if (event === `change:${name}`) f(); },
    save_changes: () => {},
    send: () => {},
    on: (event, f) => listeners.push([event, f]),
    off: () => { listeners.length = 0; },
  };
  const url = URL.createObjectURL(new Blob([SOURCE], { type: "text/javascript" }));
  const widget = (await import(url)).default;
  const el = document.createElement("div");
  host.querySelector("img").replaceWith(el);
  widget.render({ model, el });
}
"""
