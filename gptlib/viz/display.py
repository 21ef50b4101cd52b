"""Showing a matplotlib Figure in a notebook as a PNG, the same way in every backend.

    figure_png(fig)    PNG bytes with a tight bounding box: static figures of any layout
    render_png(fig)    PNG bytes from one Agg draw: the explorers' pictures, laid out in pixels
    canvas_png(canvas) PNG bytes of what an Agg canvas holds (after a partial redraw)
    show_figure(fig)   display figure_png(fig) as an image output
"""

from __future__ import annotations

import io

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PIL import Image


def figure_png(fig: Figure, dpi: int = 100) -> bytes:
    """The figure rendered as PNG bytes, cropped to what it draws (two draws: measure, then render)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    return buffer.getvalue()


def render_png(fig: Figure) -> bytes:
    """The figure at its own size and dpi as PNG bytes, from a single draw.

    The explorers redraw on every key press, so they skip what costs most in figure_png:
    the measuring draw of a tight bounding box (their figures are laid out in pixels and need
    no cropping) and zlib's default effort (level 1 makes a slightly larger file several
    times faster; the bytes only travel to a browser on the same machine).
    """
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas_png(canvas)


def canvas_png(canvas: FigureCanvasAgg) -> bytes:
    """What an Agg canvas holds now, as PNG bytes (zlib level 1, see render_png)."""
    buffer = io.BytesIO()
    rgba = Image.frombuffer("RGBA", canvas.get_width_height(), canvas.buffer_rgba(), "raw", "RGBA", 0, 1)
    rgba.convert("RGB").save(buffer, format="png", compress_level=1)
    return buffer.getvalue()


def show_figure(fig: Figure, dpi: int = 100) -> None:
    """Display `fig` as a PNG image (inside an ipywidgets.Output if called in its context).

    Rendering the bytes ourselves avoids pyplot's global state, so a figure never shows
    twice and never turns into an interactive canvas when ipympl is active elsewhere.
    """
    from IPython.display import Image as PNG
    from IPython.display import display

    display(PNG(figure_png(fig, dpi)))
