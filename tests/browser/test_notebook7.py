"""Notebook 7 (`jupyter notebook`), a front end beside JupyterLab: notebook 04's sphere is shown once, as
saved and once run, and the live one draws and moves."""

from jupyterlab_driver import code_cell, explorers_shown, frame_ms, live, open_notebook7, run_cell, unrun_cell_shows_one_picture


def test_the_sphere_is_shown_once_before_and_after_its_cell_runs_in_notebook_7(page, notebook7):
    open_notebook7(page, notebook7, "04_layernorm_geometry.ipynb")
    unrun_cell_shows_one_picture(page, "LayerNormSphere()")  # the static copy's PNG, as saved
    run_cell(page, "04_layernorm_geometry.ipynb", "sphere = LayerNormSphere()")
    sphere = live(page, "gptlib-sphere")
    sphere.wait_for(timeout=60_000)
    assert explorers_shown(code_cell(page, "LayerNormSphere()")) == 1  # the widget only, not its copy beside it
    turn = sphere.locator(".gptlib-sphere-turn input[type=range]")
    frame_ms(sphere, lambda: turn.press("ArrowRight"))
    assert turn.get_attribute("aria-valuetext") == "35"
    sphere.locator(".gptlib-sphere-message").filter(has_text="exactly on the circle").wait_for(timeout=30_000)
