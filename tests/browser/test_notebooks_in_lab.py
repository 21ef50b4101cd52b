"""Notebook 00 in a real JupyterLab: it runs, and a link of its contents opens an exercise's notebook
at that heading.

JupyterLab names a heading by its text with spaces replaced by '-' (data-jupyter-id); the links in
the notebooks use that name, and the book makes the same anchors (book/slugs.py). Both checks share
one page: a JupyterLab page load is the costliest step of a browser test here.
"""

from tests.support.browser.jupyterlab_driver import open_and_run_all, output_texts

ANCHOR = "✎-Your-turn-·-Exercise-2-★:-is-the-whole-GPT-causal?"


def test_setup_notebook_runs_in_jupyterlab_and_its_contents_link_opens_the_exercise_heading(page, lab):
    open_and_run_all(page, lab, "00_setup_and_notation.ipynb")
    outputs = output_texts(page)
    assert any("816,640" in text for text in outputs)
    assert any("H must divide d" in text for text in outputs)  # the cell tagged raises-exception

    link = page.locator(".jp-RenderedMarkdown a", has_text="Exercise 2 ★").first
    link.scroll_into_view_if_needed()
    link.click()
    page.wait_for_function(
        """(anchor) => {
            const current = window.jupyterapp.shell.currentWidget;
            const heading = document.querySelector(`[data-jupyter-id="${anchor}"]`);
            if (!current || current.title.label !== '06_causality.ipynb' || heading === null) return false;
            const y = heading.getBoundingClientRect().y;
            return 0 <= y && y < window.innerHeight;
        }""",
        arg=ANCHOR,
        timeout=60_000,
    )
