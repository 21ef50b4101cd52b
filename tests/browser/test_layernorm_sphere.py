"""Notebook 04's LayerNorm sphere, drawn in the page and moved with the keyboard as a learner would."""

import json

import pytest
from playwright.sync_api import Error

from tests.support.browser.axe_audit import violations
from tests.support.browser.jupyterlab_driver import (
    code_cell,
    explorers_shown,
    frame_ms,
    offset_in,
    open_explorer,
    run_code,
    settled_offset_in,
)


def type_into_box(sphere, css_class: str, value: str) -> None:
    """Type a value into the text box beside a slider, the way a learner sets an exact value."""
    box = sphere.locator(f".{css_class} input[type=text]")
    box.fill(value)
    box.press("Enter")


def open_sphere(page, lab):
    """Open notebook 04 in JupyterLab, see its saved sphere, run it and bring the live sphere into view."""
    return open_explorer(page, lab, "04_layernorm_geometry.ipynb", "LayerNormSphere()", "gptlib-sphere",
                         run="sphere = LayerNormSphere()")


def test_sphere_draws_in_the_page_reads_out_on_hover_refuses_bad_text_and_hears_from_the_kernel(page, lab):
    sphere = open_sphere(page, lab)
    message = sphere.locator(".gptlib-sphere-message")
    message.filter(has_text="exactly on the circle").wait_for(timeout=30_000)  # the kernel's explanation

    turn = sphere.locator(".gptlib-sphere-turn input[type=range]")
    assert turn.get_attribute("aria-label") == "turn" and turn.get_attribute("aria-valuetext") == "30"
    frame_ms(sphere, lambda: turn.press("ArrowRight"))  # a frame drawn in the page, no kernel on the way
    assert sphere.locator(".gptlib-sphere-turn input[type=text]").input_value() == "35"
    assert turn.get_attribute("aria-valuetext") == "35"
    u1 = sphere.locator(".gptlib-sphere-u0 input[type=range]")
    u1.press("ArrowDown")
    assert u1.get_attribute("aria-valuetext") == "1.1"  # read out as the step's decimal, never 1.1000000000000001

    eps = sphere.locator(".gptlib-sphere-eps input[type=range]")
    frame_ms(sphere, lambda: eps.press("ArrowRight"))
    assert eps.get_attribute("aria-valuetext") == "0.001"
    message.filter(has_text="eps = 0.001 > 0").wait_for(timeout=30_000)  # the kernel got the value and answered

    type_into_box(sphere, "gptlib-sphere-u0", "0.125")
    assert sphere.locator(".gptlib-sphere-u0 input[type=text]").input_value() == "0.125"  # echoed exactly
    readout = sphere.locator(".gptlib-sphere-readout")  # written when the next animation frame draws
    readout.filter(has_text="cu = (0.125, 0.800, 0.400)").wait_for(timeout=5_000)

    canvas = sphere.locator("canvas.gptlib-sphere-output")
    points = {name: (x, y) for name, x, y in json.loads(canvas.get_attribute("data-points"))}
    canvas.hover(position={"x": points["LN(cu)"][0], "y": points["LN(cu)"][1]})
    tip = sphere.locator(".gptlib-tip")
    tip.wait_for(timeout=5_000)
    assert tip.inner_text().startswith("LN(cu) = (")
    assert "LN(cu) = (" in canvas.get_attribute("aria-label")  # the picture's text alternative

    preset = sphere.locator(".gptlib-sphere-view button", has_text="down the all-ones axis")
    preset.focus()
    frame_ms(sphere, lambda: preset.press("Space"))
    assert sphere.locator(".gptlib-sphere-tilt input[type=text]").input_value() == "90"
    assert preset.get_attribute("aria-pressed") == "true"

    box = settled_offset_in(page, sphere, canvas)  # typed text that is not a number in range: refused, nothing moves
    type_into_box(sphere, "gptlib-sphere-u0", "abc")
    message.filter(has_text="Cannot draw").wait_for(timeout=30_000)
    assert "u_1: 'abc' is not a number" in message.inner_text() and "last valid input" in message.inner_text()
    assert "gptlib-stale" in canvas.get_attribute("class") and offset_in(sphere, canvas) == box
    type_into_box(sphere, "gptlib-sphere-u0", "12.5")
    message.filter(has_text="u_1 must be a finite number in [-3.0, 3.0], got 12.5").wait_for(timeout=30_000)
    assert sphere.bounding_box()["height"] < 700  # controls beside the picture, never a tall panel

    for css_class in ("gptlib-sphere-u0", "gptlib-sphere-u1", "gptlib-sphere-u2"):
        type_into_box(sphere, css_class, "0.5")
    message.filter(has_text="constant").wait_for(timeout=30_000)
    assert "Traceback" not in sphere.inner_text()
    assert explorers_shown(code_cell(page, "LayerNormSphere()")) == 1  # the widget, its static copy not beside it

    run_code(page, "sphere.eps = 0.5")  # set from code, not one of the slider's steps: the page says why, as the kernel does
    steps = "0, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1, 3"
    message.filter(has_text=f"Cannot draw: eps must be one of the slider's steps ({steps}), got 0.5").wait_for(timeout=30_000)
    assert "gptlib-stale" in canvas.get_attribute("class")
    with pytest.raises(Error, match="u_1 must be a finite number, got nan"):
        run_code(page, "sphere.u0 = float('nan')")  # refused in the kernel: nothing reaches the page
    run_code(page, "sphere.eps = 0.01")  # a step again: drawn (u is still the constant (0.5, 0.5, 0.5))
    message.filter(has_text="u is constant").wait_for(timeout=30_000)
    # The message is set at once; the picture, and its class, at the next animation frame: wait for that frame.
    sphere.locator("canvas.gptlib-sphere-output:not(.gptlib-stale)").wait_for(timeout=30_000)
    assert "gptlib-error" not in message.get_attribute("class")
    # WCAG 2.1 A and AA on what the explorer's cell shows. The rest of the page is JupyterLab's own
    # chrome (toolbar buttons with aria-pressed on jp-button, CodeMirror editors without names, the
    # windowed notebook's viewport), which this project cannot change.
    assert violations(page, include=[".jp-OutputArea-child:has(.gptlib-sphere)"]) == []
