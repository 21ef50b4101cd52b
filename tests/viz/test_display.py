"""gptlib.viz.display: a shown figure carries its text alternative in every form a viewer reads."""

import base64
import io

import pytest

pytest.importorskip("matplotlib")

import IPython.display  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from PIL import Image  # noqa: E402

from gptlib.viz.display import PAD_INCHES, figure_png, image_output, show_figure  # noqa: E402


def test_an_image_output_holds_the_png_and_its_alt_text_in_each_mime_type():
    png = b"\x89PNG not really"
    data, metadata = image_output(png, 'a "quoted" <b>alt</b>')
    assert base64.b64decode(data["image/png"]) == png
    assert data["text/html"] == ('<img alt="a &quot;quoted&quot; &lt;b&gt;alt&lt;/b&gt;" '
                                 f'src="data:image/png;base64,{data["image/png"]}">')
    assert data["text/plain"] == metadata["image/png"]["alt"] == 'a "quoted" <b>alt</b>'


def test_show_figure_uses_the_figures_label_or_alt_and_refuses_neither(monkeypatch):
    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda data, **kwargs: shown.append((data, kwargs)))
    fig = Figure(figsize=(1, 1))
    fig.add_subplot().plot([0, 1])
    fig.set_label("a rising line")
    show_figure(fig)
    show_figure(fig, alt="a line from (0, 0) to (1, 1)")
    assert [data["text/plain"] for data, _ in shown] == ["a rising line", "a line from (0, 0) to (1, 1)"]
    assert base64.b64decode(shown[0][0]["image/png"]) == figure_png(fig)
    assert shown[0][1] == {"metadata": {"image/png": {"alt": "a rising line"}}, "raw": True}
    fig.set_label("")
    with pytest.raises(ValueError, match="needs a text alternative"):
        show_figure(fig)


def _savefig_png(fig):
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight", pad_inches=PAD_INCHES)
    return buffer.getvalue()


def _size(png):
    return Image.open(io.BytesIO(png)).size


def test_figure_png_is_savefigs_tight_crop_to_a_pixel():
    fig = Figure(figsize=(4, 3))
    axes = fig.add_subplot()
    axes.plot([0, 1], [0, 1e6])
    axes.set_title("a title", fontsize=20)
    png, reference = figure_png(fig), _savefig_png(fig)
    assert all(abs(a - b) <= 2 for a, b in zip(_size(png), _size(reference)))
    assert _size(png)[0] < 400  # cropped: the canvas itself is 400 x 300 pixels
    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("L"))
    assert pixels.min() < 128 and (pixels[0] == 255).all() and (pixels[:, -1] == 255).all()  # drawn, in a white margin


def test_figure_png_drawing_beyond_its_canvas_is_savefigs():
    fig = Figure(figsize=(2, 2))
    axes = fig.add_subplot()
    axes.plot([0, 1], label="a line")
    axes.legend(loc="upper left", bbox_to_anchor=(1.5, 1))  # beyond the canvas's right edge
    png = figure_png(fig)
    assert png == _savefig_png(fig)
    assert _size(png)[0] > 200  # savefig enlarged the canvas to hold the legend
