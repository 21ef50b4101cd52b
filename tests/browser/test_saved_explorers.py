"""Explorers in a notebook saved as HTML, with and without widget state, opened offline.

A notebook saved as HTML (`jupyter nbconvert --to html`, no options) shows each explorer once, alive,
from its static copy. A page that holds widget state (`jupyter nbconvert --to html --execute`, which
stores it by default, or a notebook saved with its widget state) shows each explorer's widget view
instead, whose renderer comes from a CDN: offline it draws nothing, and the explorer's second output
brings back its static copy. (That each explorer cell of a saved notebook opened in JupyterLab or
Notebook 7 shows one picture before it runs is checked as the explorer tests open their notebooks:
jupyterlab_driver.unrun_cell_shows_one_picture.)
"""

import base64
import json
import os
import re
import subprocess
import sys

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from gptlib.viz.attention import AttentionExplorer
from gptlib.viz.counting import ParameterCountExplorer
from gptlib.viz.layernorm import LayerNormSphere
from gptlib.viz.stream import StreamExplorer
from tests.support.browser.jupyterlab_driver import explorers_per_cell, saved, saved_count_counts_six_blocks
from tests.support.browser.servers import ROOT

NOTEBOOKS = ["01_multi_head_attention", "04_layernorm_geometry", "05_gpt_and_parameter_count", "08_trained_model_tour"]


def test_a_notebook_saved_as_html_shows_each_explorer_once_alive_without_a_kernel(page, tmp_path):
    """nbconvert picks the static copy from each explorer's output (the notebooks hold no widget state
    that would make it pick the widget view); the count explorer's copy still counts."""
    subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", "--output-dir", str(tmp_path),
                    *(str(ROOT / "notebooks" / f"{name}.ipynb") for name in NOTEBOOKS)],
                   check=True, capture_output=True, timeout=240)
    for name in NOTEBOOKS:
        page.goto((tmp_path / f"{name}.html").as_uri())
        cells = 2 if name == "08_trained_model_tour" else 1  # 08: the next-character and the attention explorer
        assert explorers_per_cell(page, ".jp-Cell") == [1] * cells, name
    page.goto((tmp_path / "05_gpt_and_parameter_count.html").as_uri())
    saved_count_counts_six_blocks(page)


# Each explorer once, as a cell shows it; its module's root element and the picture it draws.
SETUP = "\n".join([*(f"from {explorer.__module__} import {explorer.__name__}" for explorer in
                      (AttentionExplorer, LayerNormSphere, ParameterCountExplorer, StreamExplorer)),
                    "from gptlib import pretrained", 'model = pretrained.load_pretrained("shakespeare")'])
EXPLORERS = {
    'AttentionExplorer(model, text="ROMEO: But soft")': ("gptlib-attn-explorer", "canvas.gptlib-attn-output"),
    "LayerNormSphere()": ("gptlib-sphere", "canvas.gptlib-sphere-output"),
    "ParameterCountExplorer()": ("gptlib-count", "table.gptlib-count-output"),
    'StreamExplorer(model, "ROMEO: But soft")': ("gptlib-stream-explorer", "canvas.gptlib-stream-bars"),
}
WIDGET_VIEW = 'script[type="application/vnd.jupyter.widget-view+json"]'


def nbconvert(*args: str, cwd) -> None:
    """jupyter nbconvert, its kernel importing this tree's gptlib, bounded in time."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--ExecutePreprocessor.timeout=120", *args],
                   cwd=cwd, env=env, check=True, capture_output=True, timeout=240)


@pytest.fixture(scope="module")
def pages_with_widget_state(tmp_path_factory) -> dict:
    """A small notebook showing each explorer, executed by nbconvert (which stores the widget state
    unless told not to): exported in one step (--to html --execute), and saved as a notebook with its
    widget state, then exported (as nbviewer or `nbconvert --to html` export a notebook that JupyterLab
    saved with its widget state, in the same schema: such a notebook, saved by JupyterLab 4.6 with the
    widget manager's saveState on, was checked by hand to show the same)."""
    tmp = tmp_path_factory.mktemp("widget-state")
    notebook = new_notebook(cells=[new_code_cell(SETUP), *map(new_code_cell, EXPLORERS)])
    notebook.metadata.kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, tmp / "explorers.ipynb")
    nbconvert("--to", "html", "--execute", "--output", "executed", "explorers.ipynb", cwd=tmp)
    nbconvert("--to", "notebook", "--execute", "--output", "saved", "explorers.ipynb", cwd=tmp)
    saved_notebook = nbformat.read(tmp / "saved.ipynb", as_version=4)
    state = saved_notebook.metadata.widgets["application/vnd.jupyter.widget-state+json"]["state"]
    views = [output.data["application/vnd.jupyter.widget-view+json"]["model_id"]
             for cell in saved_notebook.cells[1:] for output in cell.outputs
             if "application/vnd.jupyter.widget-view+json" in output.get("data", {})]
    assert len(views) == len(EXPLORERS) and set(views) <= set(state)  # saved with the state of each explorer
    for buffer in (buffer for model in state.values() for buffer in model.get("buffers", [])):
        buffer.data, buffer.encoding = base64.b64decode(buffer.data).hex(), "hex"  # the schema's other encoding
    nbformat.write(saved_notebook, tmp / "saved_hex.ipynb")
    nbconvert("--to", "html", "saved.ipynb", "saved_hex.ipynb", cwd=tmp)
    return {"executed and exported": tmp / "executed.html", "saved with widget state": tmp / "saved.html",
            "saved with widget state, bytes in hex": tmp / "saved_hex.html"}


@pytest.mark.parametrize("how", ["executed and exported", "saved with widget state", "saved with widget state, bytes in hex"])
def test_offline_a_page_with_widget_state_shows_each_explorers_static_copy(page, pages_with_widget_state, how):
    """The page chose every explorer's widget view (its state is stored) and cannot load the widget
    renderer (requests leaving 127.0.0.1 are refused): each explorer shows once, as a static copy
    drawn by its module, and nothing fails but the page's requests to a CDN."""
    errors, failed = [], []
    page.on("console", lambda message: message.type == "error" and errors.append(message.text))
    page.on("requestfailed", lambda request: failed.append(request.url))
    page.goto(pages_with_widget_state[how].as_uri())
    assert page.locator(WIDGET_VIEW).count() == len(EXPLORERS)  # nbconvert picked the widget views
    for root, picture in EXPLORERS.values():
        drawn = saved(page, root).locator(picture)
        drawn.wait_for(timeout=30_000)
        box = drawn.bounding_box()
        assert box is not None and box["width"] > 0 and box["height"] > 0, root
    assert explorers_per_cell(page, ".jp-Cell") == [1] * len(EXPLORERS)
    assert any("/@jupyter-widgets/html-manager@" in url for url in failed)  # the widget renderer, refused
    assert all(re.match(r"https?://", url) and "127.0.0.1" not in url for url in failed), failed
    assert all(error.startswith("Failed to load resource") for error in errors), json.dumps(errors)


# Stands in for @jupyter-widgets/html-manager where the page can load it: each view it can draw it
# draws in a new element before the view's script tag (its libembed.ts, renderManager); here, as an
# explorer's module would, in an element of class gptlib-explorer.
RENDERER = f"""for (const tag of document.querySelectorAll('{WIDGET_VIEW}')) {{
  const view = Object.assign(document.createElement("div"), {{className: "widget-subarea"}});
  view.append(Object.assign(document.createElement("div"), {{className: "gptlib-explorer", textContent: "drawn live"}}));
  tag.before(view);
}}"""


def test_where_the_widget_renderer_loads_the_static_copy_gives_way_to_the_view(page, pages_with_widget_state):
    """Online (nbviewer, or an exported page with network) the view is drawn from the stored state:
    each explorer shows once, the view, not the copy beside it."""
    page.route(re.compile(r"/@jupyter-widgets/html-manager@"), lambda route: route.fulfill(
        body=RENDERER, content_type="text/javascript"))
    page.goto(pages_with_widget_state["executed and exported"].as_uri())
    page.locator(".widget-subarea .gptlib-explorer").first.wait_for(timeout=30_000)
    assert explorers_per_cell(page, ".jp-Cell") == [1] * len(EXPLORERS)
    assert page.locator(".widget-subarea .gptlib-explorer:visible").count() == len(EXPLORERS)
