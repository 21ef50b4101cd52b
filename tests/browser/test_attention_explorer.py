"""Notebook 01's attention explorer, used in JupyterLab with the keyboard as a learner would."""

from jupyterlab_driver import (
    image_source,
    offset_in,
    open_and_run_all,
    picture,
    picture_digest,
    round_trip_ms,
    wait_for_new_image,
)

ACTIVE_CELL = "() => window.jupyterapp.shell.currentWidget.content.activeCellIndex"


def test_arrow_keys_move_layer_and_head_and_the_picture_changes_in_place(page, lab):
    open_and_run_all(page, lab, "01_multi_head_attention.ipynb")
    explorer = page.locator(".gptlib-attn-explorer").first
    explorer.scroll_into_view_if_needed()
    message = explorer.locator(".gptlib-attn-message")
    layer = explorer.locator(".gptlib-attn-layer .noUi-handle")
    head = explorer.locator(".gptlib-attn-head .noUi-handle")
    layer.focus()
    active = page.evaluate(ACTIVE_CELL)

    round_trip_ms(page, "gptlib-attn-output", lambda: layer.press("ArrowRight"))  # fails on a blank frame
    assert "layer 1, head 0" in message.inner_text()
    head.focus()
    round_trip_ms(page, "gptlib-attn-output", lambda: head.press("ArrowRight"))
    round_trip_ms(page, "gptlib-attn-output", lambda: head.press("ArrowRight"))
    assert "layer 1, head 2" in message.inner_text()
    assert page.evaluate(ACTIVE_CELL) == active  # JupyterLab took none of the keys

    text = explorer.locator(".gptlib-attn-text textarea")
    before = image_source(page, "gptlib-attn-output")
    text.fill("To be, or not to be")
    wait_for_new_image(page, "gptlib-attn-output", before)
    message.filter(has_text="19 characters, layer 1, head 2").wait_for(timeout=30_000)


def test_bad_text_keeps_the_last_picture_under_the_reason_without_a_jump(page, lab):
    open_and_run_all(page, lab, "01_multi_head_attention.ipynb")
    explorer = page.locator(".gptlib-attn-explorer").first
    explorer.scroll_into_view_if_needed()
    image = explorer.locator(picture("gptlib-attn-output")).first
    shown, box = picture_digest(page, "gptlib-attn-output"), offset_in(explorer, image)

    explorer.locator(".gptlib-attn-text textarea").fill("naïve café")
    message = explorer.locator(".gptlib-attn-message")
    message.filter(has_text="Cannot draw").wait_for(timeout=30_000)
    assert "'é'" in message.inner_text() and "'ï'" in message.inner_text()
    assert "last valid input" in message.inner_text() and "Traceback" not in explorer.inner_text()
    assert picture_digest(page, "gptlib-attn-output") == shown and "gptlib-stale" in image.get_attribute("class")
    assert offset_in(explorer, image) == box  # nothing moved: the picture stays where it was
    assert message.bounding_box()["y"] < image.bounding_box()["y"]  # the reason sits above the picture
