"""What the three explorers share: a status line above a picture that changes in place.

Every explorer (AttentionExplorer, LayerNormSphere, ParameterCountExplorer) has
    .message   str: the plain text of its status line ("" before the first drawing)
    .status    the ipywidgets.HTML that shows .message, above the picture
    .image     the ipywidgets.Image holding the current picture (PNG bytes)
and behaves the same way:
  - a new picture replaces the old one's bytes in place: nothing blanks, nothing below moves;
  - input it cannot draw keeps the last good picture, greyed out, and the status line says
    what is wrong and that the picture shows the last valid input;
  - displaying it also leaves its first picture as an ordinary image output, so a saved
    notebook, a rendered page or a book shows the figure without a kernel (in a live page
    the widget's own style hides that copy, so the figure is not shown twice);
  - its text repr says in one line what it is and to run the cell.
What the learner types into an explorer's text box is read by typed_number, and its range
checked by gptlib.checks, so every box refuses bad text in the same words.
"""

from __future__ import annotations

import base64
import html
from decimal import Decimal, InvalidOperation

import ipywidgets as widgets

STALE = "gptlib-stale"
# Grey out a stale picture; hide the static copy that directly precedes a live explorer's output.
STYLE = f"""<style>
.{STALE} {{ opacity: 0.35; filter: grayscale(1); }}
.jp-OutputArea-child:has(+ .jp-OutputArea-child .gptlib-explorer) {{ display: none; }}
</style>"""


def typed_number(name: str, typed: str, separators: str = "") -> Decimal:
    """What the learner typed into the box `name`, exactly, or a ValueError saying why it is not a finite number.

    Spaces around the text and every character of `separators` (e.g. ",_" between thousands)
    are ignored; "1e3" and "-0.35" are read exactly, never rounded. Whether the number is in
    range is for gptlib.checks to say.
    """
    shown = typed.strip()
    text = shown
    for mark in separators:
        text = text.replace(mark, "")
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise ValueError(f"{name}: {shown!r} is not a number") from None
    if not value.is_finite():
        raise ValueError(f"{name}: {shown!r} is not a finite number")
    return value


class Explorer(widgets.VBox):
    """Base class: `controls` above, then the status line, then the picture.

    Subclasses set `what` (a few words for the repr) and call `show(png, message)` after a
    successful drawing or `refuse(reason)` when the input cannot be drawn.
    """

    what = "an interactive figure"

    def __init__(self, controls: list[widgets.Widget], css: str, message_lines: int = 2):
        self.message = ""
        self.status = widgets.HTML(layout=widgets.Layout(min_height=f"{1.6 * message_lines}em"))
        self.status.add_class(f"gptlib-{css}-message")
        self.image = widgets.Image(format="png")
        self.image.add_class(f"gptlib-{css}-output")
        super().__init__([*controls, self.status, self.image, widgets.HTML(STYLE)])
        self.add_class("gptlib-explorer")

    def show(self, png: bytes, message: str) -> None:
        """Put a new picture in place and say what it shows."""
        self.image.value = png
        self.image.remove_class(STALE)
        self._say(message, error=False)

    def refuse(self, reason: str) -> None:
        """Keep the last picture, greyed out, under a message that says why nothing new was drawn."""
        shown = "the picture below still shows the last valid input" if self.image.value else "nothing is drawn"
        self.image.add_class(STALE)
        self._say(f"Cannot draw: {reason} ({shown}).", error=True)

    def _say(self, text: str, error: bool) -> None:
        self.message = text
        colour = "#b00020" if error else "inherit"
        self.status.value = f'<span style="color:{colour}">{html.escape(text, quote=False)}</span>'

    def __repr__(self) -> str:
        return f"{type(self).__name__}, {self.what}: run this cell in Jupyter to use it"

    def _ipython_display_(self) -> None:
        from IPython.display import display

        if self.image.value:  # the static picture, an ordinary image output
            static = {"image/png": base64.b64encode(bytes(self.image.value)).decode("ascii"),
                      "text/plain": f"[the first picture of the {type(self).__name__} below]"}
            display(static, raw=True)
        display(self._repr_mimebundle_(), raw=True)  # the live widget
