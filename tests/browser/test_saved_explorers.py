"""A saved notebook opened without running it: each explorer cell still shows a picture, and a
notebook saved as HTML keeps its explorer alive."""

import subprocess
import sys

import pytest
from jupyterlab_driver import saved_count_counts_six_blocks
from servers import ROOT

EXPLORER_CELLS = {
    "01_multi_head_attention.ipynb": "AttentionExplorer(",
    "04_layernorm_geometry.ipynb": "LayerNormSphere()",
    "05_gpt_and_parameter_count.ipynb": "ParameterCountExplorer()",
}


@pytest.mark.parametrize("notebook, source", EXPLORER_CELLS.items())
def test_an_unrun_explorer_cell_shows_its_picture(page, lab, notebook, source):
    base, token = lab
    page.goto(f"{base}/lab/tree/{notebook}?token={token}&reset")
    cell = page.locator(".jp-CodeCell", has=page.locator(".jp-InputArea", has_text=source)).first
    cell.wait_for(timeout=120_000)
    cell.scroll_into_view_if_needed()
    pictures = cell.locator(".jp-OutputArea-output img")
    pictures.first.wait_for(timeout=30_000)
    shown = [pictures.nth(i) for i in range(pictures.count()) if pictures.nth(i).is_visible()]
    assert len(shown) == 1  # the static copy, or the widget drawn from its saved state: never none, never two
    assert shown[0].evaluate("img => img.complete && img.naturalWidth > 200")


def test_a_notebook_saved_as_html_keeps_its_explorer_alive_without_a_kernel(page, tmp_path):
    """`jupyter nbconvert --to html` of notebook 05: the count explorer's static copy still counts."""
    notebook = ROOT / "notebooks" / "05_gpt_and_parameter_count.ipynb"
    subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", "--output-dir", str(tmp_path),
                    str(notebook)], check=True, capture_output=True, timeout=120)
    page.goto((tmp_path / "05_gpt_and_parameter_count.html").as_uri())
    saved_count_counts_six_blocks(page)
