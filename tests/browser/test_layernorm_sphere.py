"""Notebook 04's LayerNorm sphere, moved with the keyboard as a learner would."""

from jupyterlab_driver import image_source, open_and_run_all, wait_for_new_image


def type_into_readout(page, css_class: str, value: str) -> None:
    """Type a value into a slider's editable readout, the way a learner sets an exact value."""
    readout = page.locator(f".{css_class} .widget-readout").first
    readout.click()
    page.keyboard.press("Control+A")
    page.keyboard.type(value)
    page.keyboard.press("Enter")


def test_sphere_redraws_on_slider_keys_and_explains_constant_u(page, lab):
    open_and_run_all(page, lab, "04_layernorm_geometry.ipynb")
    sphere = page.locator(".gptlib-sphere").first
    sphere.scroll_into_view_if_needed()
    first = image_source(page, "gptlib-sphere-output")

    handle = page.locator(".gptlib-sphere-azim .noUi-handle").first
    handle.focus()
    handle.press("ArrowRight")
    rotated = wait_for_new_image(page, "gptlib-sphere-output", first)

    page.locator(".gptlib-sphere-u0 .noUi-handle").first.press("ArrowLeft")
    wait_for_new_image(page, "gptlib-sphere-output", rotated)

    for css_class in ("gptlib-sphere-u0", "gptlib-sphere-u1", "gptlib-sphere-u2"):
        type_into_readout(page, css_class, "0.5")
    message = page.locator(".gptlib-sphere-message").first
    message.filter(has_text="constant").wait_for(timeout=30_000)
    assert "Traceback" not in sphere.inner_text()
