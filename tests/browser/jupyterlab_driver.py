"""Driving an open JupyterLab page: run a notebook, read its outputs, find widgets."""

from __future__ import annotations


def open_and_run_all(page, lab, notebook: str, timeout_ms: int = 120_000) -> None:
    """Open a notebook in JupyterLab, wait for its kernel, run all cells and wait for them."""
    base, token = lab
    page.goto(f"{base}/lab/tree/{notebook}?token={token}&reset")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=timeout_ms)
    page.locator("#jp-main-statusbar", has_text="Idle").wait_for(timeout=timeout_ms)
    # Clear the stored outputs first, so that numbered prompts can only come from this run.
    page.evaluate("window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs')")
    page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
    page.wait_for_function(
        """() => {
            const cells = [...window.jupyterapp.shell.currentWidget.content.model.cells];
            return cells.filter(c => c.type === 'code').every(c => c.executionCount !== null);
        }""",
        timeout=timeout_ms,
    )
    page.locator("#jp-main-statusbar", has_text="Idle").wait_for(timeout=timeout_ms)


def output_texts(page) -> list[str]:
    """The text of every output of the open notebook, read from its model, not the DOM.

    JupyterLab does not render cells scrolled out of view, so DOM text can be empty.
    """
    return page.evaluate(
        """() => [...window.jupyterapp.shell.currentWidget.content.model.cells]
            .filter(c => c.type === 'code')
            .flatMap(c => c.outputs.toJSON())
            .map(o => o.text ?? (o.data && o.data['text/plain']) ?? o.evalue ?? '')
            .map(t => Array.isArray(t) ? t.join('') : t)"""
    )


def image_source(page, css_class: str, timeout_ms: int = 30_000) -> str:
    """The src of the PNG that the widget output area with this class shows (waits for one)."""
    image = page.locator(f".{css_class} img").first
    image.wait_for(timeout=timeout_ms)
    return image.get_attribute("src")


def wait_for_new_image(page, css_class: str, old_src: str, timeout_ms: int = 30_000) -> str:
    """Wait until the widget's PNG differs from `old_src`; return the new src."""
    page.wait_for_function(
        """([cls, old]) => {
            const img = document.querySelector(`.${cls} img`);
            return img !== null && img.getAttribute('src') !== old;
        }""",
        arg=[css_class, old_src],
        timeout=timeout_ms,
    )
    return image_source(page, css_class)
