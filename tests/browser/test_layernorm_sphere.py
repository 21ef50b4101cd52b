"""Notebook 04's LayerNorm sphere, moved with the keyboard as a learner would."""

import re

from jupyterlab_driver import (
    offset_in,
    open_and_run_all,
    picture,
    picture_digest,
    round_trip_ms,
    settled_offset_in,
)
from playwright.sync_api import expect


def type_into_box(page, css_class: str, value: str) -> None:
    """Type a value into the text box beside a slider, the way a learner sets an exact value."""
    box = page.locator(f".{css_class}-text input").first
    box.click()
    page.keyboard.press("Control+A")
    page.keyboard.type(value)
    page.keyboard.press("Enter")


def open_sphere(page, lab):
    """Run notebook 04 in JupyterLab and bring its sphere into view (JupyterLab draws it only then)."""
    open_and_run_all(page, lab, "04_layernorm_geometry.ipynb")
    sphere = page.locator(".gptlib-sphere").first
    sphere.scroll_into_view_if_needed()
    return sphere


def test_sphere_redraws_in_place_on_keys_presets_and_explains_constant_u(page, lab):
    sphere = open_sphere(page, lab)
    message = sphere.locator(".gptlib-sphere-message")

    turn = sphere.locator(".gptlib-sphere-turn .noUi-handle")
    turn.focus()
    round_trip_ms(page, "gptlib-sphere-output", lambda: turn.press("ArrowRight"))  # fails on a blank frame
    eps = sphere.locator(".gptlib-sphere-eps .noUi-handle")
    eps.focus()
    for shown in ("0.001", "0.003", "0.01"):  # every step of epsilon draws a different picture
        round_trip_ms(page, "gptlib-sphere-output", lambda: eps.press("ArrowRight"))
        assert f"eps = {shown} > 0" in message.inner_text()

    oblique = sphere.locator(".gptlib-sphere-view button", has_text="oblique")  # turn moved: no preset selected
    expect(oblique).not_to_have_class(re.compile(r"\bmod-active\b"), timeout=30_000)
    oblique.focus()
    round_trip_ms(page, "gptlib-sphere-output", lambda: oblique.press("Space"))  # a click always applies it
    assert sphere.locator(".gptlib-sphere-turn-text input").input_value() == "30"
    expect(oblique).to_have_class(re.compile(r"\bmod-active\b"))

    preset = sphere.locator(".gptlib-sphere-view button", has_text="down the all-ones axis")
    preset.focus()
    round_trip_ms(page, "gptlib-sphere-output", lambda: preset.press("Space"))
    assert sphere.locator(".gptlib-sphere-tilt-text input").input_value() == "90"

    for css_class in ("gptlib-sphere-u0", "gptlib-sphere-u1", "gptlib-sphere-u2"):
        type_into_box(page, css_class, "0.5")
    message.filter(has_text="constant").wait_for(timeout=30_000)
    assert "Traceback" not in sphere.inner_text()


def test_text_typed_beside_a_slider_that_is_not_a_number_is_refused_without_a_jump(page, lab):
    sphere = open_sphere(page, lab)
    image = sphere.locator(picture("gptlib-sphere-output")).first
    shown, box = picture_digest(page, "gptlib-sphere-output"), settled_offset_in(page, sphere, image)

    type_into_box(page, "gptlib-sphere-u0", "abc")
    message = sphere.locator(".gptlib-sphere-message")
    message.filter(has_text="Cannot draw").wait_for(timeout=30_000)
    assert "u_1: 'abc' is not a number" in message.inner_text() and "last valid input" in message.inner_text()
    assert picture_digest(page, "gptlib-sphere-output") == shown and "gptlib-stale" in image.get_attribute("class")
    assert offset_in(sphere, image) == box  # nothing moved: the picture stays where it was
    assert "Traceback" not in sphere.inner_text()


def test_the_static_copy_is_hidden_while_the_live_explorer_shows(page, lab):
    sphere = open_sphere(page, lab)
    live = sphere.locator(picture("gptlib-sphere-output")).first
    assert live.is_visible()
    static = page.locator(".jp-OutputArea-child:has(+ .jp-OutputArea-child .gptlib-sphere) img")
    assert static.count() == 1 and not static.is_visible()  # in the saved file, not twice on screen
