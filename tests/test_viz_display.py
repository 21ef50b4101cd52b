"""gptlib.viz.display: a shown figure carries its text alternative in every form a viewer reads."""

import base64

import pytest

pytest.importorskip("matplotlib")

import IPython.display  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from gptlib.viz.display import figure_png, image_output, show_figure  # noqa: E402


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
