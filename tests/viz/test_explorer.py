"""What the four explorers share (gptlib.viz.explorer): the static copy's script, and the values it saves."""

import base64
import html
import json
import math
from html.parser import HTMLParser
from pathlib import Path

import pytest
import torch

pytest.importorskip("anywidget")

from gptlib import COURSE_CONFIG, GPT  # noqa: E402
from gptlib.viz.attention import AttentionExplorer  # noqa: E402
from gptlib.viz.counting import ParameterCountExplorer  # noqa: E402
from gptlib.viz.explorer import FROM_STATE, WIDGET_VIEW, module, script_json  # noqa: E402
from gptlib.viz.layernorm import LayerNormSphere  # noqa: E402
from gptlib.viz.page_model import model_module  # noqa: E402

HOSTILE = ["<!--<script>", "</script><script>alert(1)</script>", "<!-- x --> & y", "]]>", "\u2028\u2029"]


@pytest.mark.parametrize("text", HOSTILE)
def test_script_json_reads_back_as_written_and_holds_no_character_that_html_reads_in_a_script(text):
    written = script_json({"typed": {"V": text}, "list": [text]})
    assert json.loads(written) == {"typed": {"V": text}, "list": [text]}
    assert not {"<", ">", "&"} & set(written)  # HTML's script data changes state only at '<'


def test_script_json_refuses_nan():
    with pytest.raises(ValueError):
        script_json({"eps": math.nan})


class Outline(HTMLParser):
    """The start and end tags of a piece of HTML in order, and the text of each script."""

    def __init__(self):
        super().__init__()
        self.tags, self.scripts = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_endtag(self, tag):
        self.tags.append("/" + tag)

    def handle_data(self, data):
        if self.tags and self.tags[-1] == "script":
            self.scripts.append(data)


def outline(page: str) -> Outline:
    parsed = Outline()
    parsed.feed(page)
    parsed.close()
    return parsed


def saved_call(script: str) -> tuple[str, dict]:
    """The module source and the values that a static copy's script (the loader js/static.js, then
    one call) hands to showSaved."""
    call = script.rsplit("\n", 1)[1]
    start = "if (host) await showSaved(host, "
    assert call.startswith(start) and call.endswith(");")
    source, state = json.loads(f"[{call[len(start):-2]}]")
    return source, state


def explorers():
    torch.manual_seed(0)
    return [AttentionExplorer(GPT(COURSE_CONFIG), text="To be"), LayerNormSphere(), ParameterCountExplorer()]


@pytest.mark.parametrize("explorer", explorers(), ids=lambda e: type(e).__name__)
def test_the_static_copy_is_one_script_that_nothing_typed_can_end_early(explorer):
    if isinstance(explorer, ParameterCountExplorer):
        explorer.type_in("V", HOSTILE[0])  # refused: the copy keeps the last valid input
    elif isinstance(explorer, AttentionExplorer):
        explorer.text = HOSTILE[1]  # refused too: '<' is not in the course vocabulary
    explorer.last_drawn = {**explorer.last_drawn, "message": HOSTILE[0] + HOSTILE[1]}  # as if a drawn value held it
    page = explorer.static_html(explorer.static_png())
    parsed = outline(page)
    assert parsed.tags == ["div", "style", "/style", "img", "script", "/script", "/div"]
    (script,) = parsed.scripts
    assert "<" not in script  # the module's own comparisons too: its source travels as escaped JSON
    source, state = saved_call(script)
    assert source == explorer.saved_module() and state["message"] == HOSTILE[0] + HOSTILE[1] and state["live"] is False


def test_the_second_output_is_one_script_that_shows_nothing_by_itself():
    """FROM_STATE: what a front end without JavaScript, or one that strips scripts, shows of it is empty."""
    parsed = outline(FROM_STATE["text/html"])
    assert parsed.tags == ["div", "script", "/script", "/div"] and FROM_STATE["text/plain"] == ""
    (script,) = parsed.scripts
    assert "<" not in script  # nothing in it can end it early


@pytest.mark.parametrize("explorer", explorers(), ids=lambda e: type(e).__name__)
def test_an_explorer_is_displayed_as_one_output_the_widget_first_then_its_static_copy_then_a_second(explorer):
    """One display output (VS Code and Colab, which cannot run here, read it as the browsers do): the
    widget view first, the static copy (the module on the saved values, the PNG and its alt text inside)
    next, the one-line repr last; each front end renders the first it can. Then FROM_STATE, for pages
    that chose the widget view from stored widget state."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.display import display
    from IPython.utils.capture import capture_output

    InteractiveShell.instance()  # the shell whose display publisher capture_output swaps for its own
    with capture_output() as captured:
        display(explorer)
    data, second = (output.data for output in captured.outputs)
    assert list(data) == [WIDGET_VIEW, "text/html", "text/plain"]
    assert WIDGET_VIEW == "application/vnd.jupyter.widget-view+json" and data[WIDGET_VIEW]["model_id"] == explorer.model_id
    png = base64.b64encode(explorer.static_png()).decode()
    assert data["text/html"] == explorer.static_html(explorer.static_png()) and f"base64,{png}" in data["text/html"]
    assert f'alt="{html.escape(explorer.alt_text())}"' in data["text/html"]
    assert data["text/plain"] == repr(explorer) and "run this cell" in data["text/plain"]
    assert second == FROM_STATE


def test_an_explorer_with_nothing_drawn_shows_the_widget_and_its_repr_only():
    from gptlib.viz.attention import AttentionExplorer

    torch.manual_seed(0)
    explorer = AttentionExplorer(GPT(COURSE_CONFIG), text="ß")  # not in the vocabulary: nothing to copy
    data, _ = explorer._repr_mimebundle_()
    assert list(data) == [WIDGET_VIEW, "text/plain"]
    assert explorer.message.startswith("Cannot draw:") and "nothing is drawn" in explorer.message


EXPLORER_NOTEBOOKS = {"01_multi_head_attention": ["attention"], "04_layernorm_geometry": ["layernorm"],
                      "05_gpt_and_parameter_count": ["counting"], "08_trained_model_tour": ["next_character", "attention"],
                      "10_reading_the_residual_stream": ["stream"]}
MODEL_MODULES = {"attention", "stream", "next_character"}  # their copies run gpt.js from the book's files


@pytest.mark.parametrize("name, front_ends", EXPLORER_NOTEBOOKS.items())
def test_a_saved_explorer_cell_holds_its_outputs_and_no_widget_state_that_would_hide_its_copy(name, front_ends):
    """Re-executed by `make notebooks` (store_widget_state=False): with the model's widget state saved,
    nbconvert's HTML would choose the widget view and need a renderer from a CDN instead of the copy.
    The copy runs today's js/ module (the book and saved HTML pages show it)."""
    notebook = json.loads((Path(__file__).parents[2] / "notebooks" / f"{name}.ipynb").read_text())
    cells = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"
             and any(WIDGET_VIEW in output.get("data", {}) for output in cell["outputs"])]
    assert len(cells) == len(front_ends)
    for cell, front_end in zip(cells, front_ends):
        assert len(cell["outputs"]) == 2  # one explorer, one output that shows it, then FROM_STATE
        assert set(cell["outputs"][0]["data"]) == {WIDGET_VIEW, "text/html", "text/plain"}
        assert {kind: "".join(text) for kind, text in cell["outputs"][1]["data"].items()} == FROM_STATE  # today's script
        static = "".join(cell["outputs"][0]["data"]["text/html"])
        source = model_module(front_end, gpt_source=False) if front_end in MODEL_MODULES else module(front_end)
        assert 'class="gptlib-static"' in static and script_json(source) in static
    assert "widgets" not in notebook["metadata"]
