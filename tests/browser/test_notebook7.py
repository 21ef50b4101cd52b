"""Notebook 7 (`jupyter notebook`), a front end beside JupyterLab: notebook 04's sphere is shown once, as
saved and once run, and the live one hears from its kernel."""

import pytest

from tests.support.browser.jupyterlab_driver import (
    code_cell,
    explorers_shown,
    live,
    open_notebook7,
    run_cell,
    unrun_cell_shows_one_picture,
)


@pytest.fixture
def known_page_errors():
    # Notebook 7.6.5's keyboard-shortcut settings handler (notebook_core.js) reads plugins[id].schema for a
    # plugin it has not loaded, on every page load, before any cell runs: Notebook's, not the explorers'.
    return ["Cannot read properties of undefined (reading 'schema')"]


def test_the_sphere_is_shown_once_before_and_after_its_cell_runs_in_notebook_7(page, notebook7):
    open_notebook7(page, notebook7, "04_layernorm_geometry.ipynb")
    unrun_cell_shows_one_picture(page, "LayerNormSphere()")  # the static copy's PNG, as saved
    run_cell(page, "04_layernorm_geometry.ipynb", "sphere = LayerNormSphere()")
    sphere = live(page, "gptlib-sphere")
    sphere.wait_for(timeout=60_000)
    assert explorers_shown(code_cell(page, "LayerNormSphere()")) == 1  # the widget only, not its copy beside it
    sphere.locator(".gptlib-sphere-message").filter(has_text="exactly on the circle").wait_for(timeout=30_000)
    assert sphere.locator("canvas.gptlib-sphere-output").get_attribute("aria-label").startswith("LayerNorm sphere")
