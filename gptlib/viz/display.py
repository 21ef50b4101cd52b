"""Showing a matplotlib Figure in a notebook as a PNG, the same way in every backend.

    figure_png(fig)    PNG bytes cropped to a tight bounding box: static figures of any layout
    render_png(fig)    PNG bytes from one Agg draw: the explorers' pictures, laid out in pixels
    pixels_png(pixels) PNG bytes of an RGB or RGBA pixel array
    image_output(png, alt) the MIME bundle of a PNG with its text alternative
    show_figure(fig)   display figure_png(fig) as an image output, its alt text the figure's label

Every picture a notebook shows carries a text alternative saying what it shows. A gptlib figure
function writes it from the data it draws into the figure's label (`fig.set_label`), so the
description travels with the figure; `show_figure(fig, alt=...)` may give another.
"""

from __future__ import annotations

import base64
import html
import io
import math

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PIL import Image

PAD_INCHES = 0.1  # margin around what a figure draws (savefig's default pad_inches)


def figure_png(fig: Figure, dpi: int = 100) -> bytes:
    """The figure rendered as PNG bytes, cropped to what it draws with a margin of PAD_INCHES.

    savefig(bbox_inches="tight") draws a figure twice (measure, then render); here one Agg
    draw is measured and its pixels cropped, the same picture up to a pixel at the edges in a
    third less time. A figure that draws beyond its own canvas (a legend pushed outside,
    say) goes through savefig, which enlarges the canvas to hold it.
    """
    own_dpi, fig.dpi = fig.dpi, dpi
    try:
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        box = fig.get_tightbbox(canvas.get_renderer()).padded(PAD_INCHES)  # inches, from the bottom left
        width, height = canvas.get_width_height()
        left, right = math.floor(box.x0 * dpi), math.ceil(box.x1 * dpi)
        top, bottom = height - math.ceil(box.y1 * dpi), height - math.floor(box.y0 * dpi)  # pixel rows, from the top
        if left >= 0 and top >= 0 and right <= width and bottom <= height:
            return pixels_png(np.asarray(canvas.buffer_rgba())[top:bottom, left:right])  # (h, w, 4)
    finally:
        fig.dpi = own_dpi
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight", pad_inches=PAD_INCHES)
    return buffer.getvalue()


def render_png(fig: Figure) -> bytes:
    """The figure at its own size and dpi as PNG bytes, from a single draw.

    The explorers' static copies skip what costs most in figure_png: the measuring draw of a
    tight bounding box (their figures are laid out in pixels and need no cropping) and zlib's
    default effort (level 1 makes a slightly larger file several times faster).
    """
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return pixels_png(np.asarray(canvas.buffer_rgba())[:, :, :3], compress_level=1)  # (h, w, 3) RGB


def pixels_png(pixels: np.ndarray, compress_level: int = 6) -> bytes:
    """PNG bytes of an (h, w, 3) RGB or (h, w, 4) RGBA uint8 array (6: Pillow's default effort)."""
    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(pixels)).save(buffer, format="png", compress_level=compress_level)
    return buffer.getvalue()


def image_output(png: bytes, alt: str) -> tuple[dict, dict]:
    """The (data, metadata) of an image output whose text alternative every viewer reads.

    text/html is an <img alt> (what JupyterLab, the book's myst-nb and nbconvert's HTML show
    first; neither renders image/png's alt metadata); image/png with its alt metadata stays for
    viewers that prefer it; text/plain is the alternative itself, for a terminal. nbval compares
    text/html and text/plain, so `alt` must hold only what a compared output may (the PNG's
    bytes are sanitized away: tests/nbval_sanitize.cfg).
    """
    encoded = base64.b64encode(png).decode("ascii")
    data = {"text/html": f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{encoded}">',
            "image/png": encoded, "text/plain": alt}
    return data, {"image/png": {"alt": alt}}


def show_figure(fig: Figure, alt: str | None = None, dpi: int = 100) -> None:
    """Display `fig` as a PNG image (inside an ipywidgets.Output if called in its context), with
    `alt`, or else the figure's label, as its text alternative (image_output).

    Rendering the bytes ourselves avoids pyplot's global state, so a figure never shows
    twice and never turns into an interactive canvas when ipympl is active elsewhere.
    """
    from IPython.display import display

    text = fig.get_label() if alt is None else alt
    if not text.strip():
        raise ValueError("show_figure needs a text alternative saying what the figure shows: "
                         "pass alt=... or set it with fig.set_label(...)")
    data, metadata = image_output(figure_png(fig, dpi), text)
    display(data, metadata=metadata, raw=True)
