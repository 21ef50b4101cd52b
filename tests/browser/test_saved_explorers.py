"""A notebook saved as HTML (`jupyter nbconvert --to html`, no options) shows each explorer once, alive.

(That each explorer cell of a saved notebook opened in JupyterLab or Notebook 7 shows one picture before
it runs is checked as the explorer tests open their notebooks: jupyterlab_driver.unrun_cell_shows_one_picture.)
"""

import subprocess
import sys

from benchmarks.browser.jupyterlab_driver import explorers_per_cell, saved_count_counts_six_blocks
from benchmarks.browser.servers import ROOT

NOTEBOOKS = ["01_multi_head_attention", "04_layernorm_geometry", "05_gpt_and_parameter_count", "08_trained_model_tour"]


def test_a_notebook_saved_as_html_shows_each_explorer_once_alive_without_a_kernel(page, tmp_path):
    """nbconvert picks the static copy from each explorer's output (the notebooks hold no widget state
    that would make it pick the widget view); the count explorer's copy still counts."""
    subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", "--output-dir", str(tmp_path),
                    *(str(ROOT / "notebooks" / f"{name}.ipynb") for name in NOTEBOOKS)],
                   check=True, capture_output=True, timeout=240)
    for name in NOTEBOOKS:
        page.goto((tmp_path / f"{name}.html").as_uri())
        assert explorers_per_cell(page, ".jp-Cell") == [1], name
    page.goto((tmp_path / "05_gpt_and_parameter_count.html").as_uri())
    saved_count_counts_six_blocks(page)
