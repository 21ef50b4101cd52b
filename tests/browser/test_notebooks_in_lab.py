"""Notebooks run in a real JupyterLab; widgets respond to the keyboard like a learner's hand."""

from jupyterlab_driver import open_and_run_all, output_texts


def test_setup_notebook_runs_in_jupyterlab(page, lab):
    open_and_run_all(page, lab, "00_setup_and_notation.ipynb")
    outputs = output_texts(page)
    assert any("816,640" in text for text in outputs)
    assert any("H must divide d" in text for text in outputs)  # the cell tagged raises-exception
