"""A notebook saved as HTML keeps its explorer alive.

(That each explorer cell of a saved notebook opened in JupyterLab shows its picture before it runs is
checked as the explorer tests open their notebooks: jupyterlab_driver.unrun_cell_shows_one_picture.)
"""

import subprocess
import sys

from jupyterlab_driver import saved_count_counts_six_blocks
from servers import ROOT


def test_a_notebook_saved_as_html_keeps_its_explorer_alive_without_a_kernel(page, tmp_path):
    """`jupyter nbconvert --to html` of notebook 05: the count explorer's static copy still counts."""
    notebook = ROOT / "notebooks" / "05_gpt_and_parameter_count.ipynb"
    subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", "--output-dir", str(tmp_path),
                    str(notebook)], check=True, capture_output=True, timeout=120)
    page.goto((tmp_path / "05_gpt_and_parameter_count.html").as_uri())
    saved_count_counts_six_blocks(page)
