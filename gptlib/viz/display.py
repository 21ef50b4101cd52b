"""Showing a matplotlib Figure in a notebook as a PNG, the same way in every backend."""

from __future__ import annotations

import io

from matplotlib.figure import Figure


def figure_png(fig: Figure, dpi: int = 100) -> bytes:
    """The figure rendered as PNG bytes."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    return buffer.getvalue()


def show_figure(fig: Figure, dpi: int = 100) -> None:
    """Display `fig` as a PNG image (inside an ipywidgets.Output if called in its context).

    Rendering the bytes ourselves avoids pyplot's global state, so a figure never shows
    twice and never turns into an interactive canvas when ipympl is active elsewhere.
    """
    from IPython.display import Image, display

    display(Image(figure_png(fig, dpi)))
