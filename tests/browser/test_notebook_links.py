"""Notebook 00's contents in JupyterLab: a link to an exercise opens its notebook at that heading.

JupyterLab names a heading by its text with spaces replaced by '-' (data-jupyter-id); the
links in the notebooks use that name, and the book makes the same anchors (book/slugs.py).
"""

ANCHOR = "✎-Your-turn-·-Exercise-2-★:-is-the-whole-GPT-causal?"


def test_contents_link_opens_the_exercise_heading(page, lab):
    base, token = lab
    page.goto(f"{base}/lab/tree/00_setup_and_notation.ipynb?token={token}&reset")
    link = page.locator(".jp-RenderedMarkdown a", has_text="Exercise 2 ★").first
    link.wait_for(timeout=120_000)
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
