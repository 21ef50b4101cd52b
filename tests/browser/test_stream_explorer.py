"""Notebook 10's stream explorer, used in JupyterLab with the keyboard and the pointer as a learner would."""

from tests.support.browser.axe_audit import violations
from tests.support.browser.jupyterlab_driver import (
    frame_ms,
    offset_in,
    open_explorer,
)

NOTEBOOK = "10_reading_the_residual_stream.ipynb"
ACTIVE_CELL = "() => window.jupyterapp.shell.currentWidget.content.activeCellIndex"


def one_frame(explorer, act, **kwargs) -> None:
    """act() is answered by exactly one frame drawn in the page (frame_ms: the next frame after the key)."""
    before = int(explorer.get_attribute("data-frames"))
    frame_ms(explorer, act, **kwargs)
    explorer.page.wait_for_timeout(100)  # a second frame, if a move drew twice, would have come by now
    assert int(explorer.get_attribute("data-frames")) == before + 1


def test_position_token_and_head_answer_in_the_page_and_bad_input_keeps_the_picture(page, lab):
    explorer = open_explorer(page, lab, NOTEBOOK, "StreamExplorer(", "gptlib-stream-explorer",
                             run="StreamExplorer(pretrained.load_pretrained")
    message, caption = explorer.locator(".gptlib-stream-message"), explorer.locator(".gptlib-stream-caption")
    row = explorer.locator(".gptlib-stream-row + .gptlib-readout")
    caption.filter(has_text="z('e') - z('o') (prediction minus true next) at position 39").wait_for(timeout=30_000)
    assert row.inner_text().startswith("L0H3 at query 39 'h', strongest keys: ")
    bars = explorer.locator("canvas.gptlib-stream-bars")
    assert bars.get_attribute("aria-describedby") == caption.get_attribute("id")  # the caption is the text alternative

    position = explorer.locator(".gptlib-stream-position input[type=range]")
    position.focus()
    active = page.evaluate(ACTIVE_CELL)
    one_frame(explorer, lambda: position.press("ArrowRight"))  # drawn from the numbers the page holds
    assert "at position 40 after 'o'" in caption.inner_text()
    assert position.get_attribute("aria-valuetext") == "position 40 of 0 to 54, after 'o'"
    assert row.inner_text().startswith("L0H3 at query 40 'o'")

    predicted = explorer.locator(".gptlib-stream-mode input[value=predicted]")
    predicted.focus()
    predicted.press("Space")  # a radio button is chosen on the key press: the mode moves in the page
    caption.filter(has_text="(the prediction) at position 40").wait_for(timeout=5_000)
    difference = explorer.locator(".gptlib-stream-mode input[value=difference]")
    one_frame(explorer, lambda: predicted.press("ArrowRight"))  # arrows move within the radio group
    assert difference.is_checked() and "prediction minus true next" in caption.inner_text()

    head = explorer.locator(".gptlib-head-button", has_text="L1H2")
    head.focus()
    assert explorer.locator(".gptlib-stream-readout").inner_text().startswith("L1H2: direct contribution ")
    one_frame(explorer, lambda: head.press("Enter"))
    assert head.get_attribute("aria-pressed") == "true" and row.inner_text().startswith("L1H2 at query 40 'o'")
    assert page.evaluate(ACTIVE_CELL) == active  # JupyterLab took none of the keys

    bars.hover(position={"x": 94, "y": 90})  # layer 0's first bar: head 0
    assert explorer.locator(".gptlib-tip").first.inner_text().startswith("L0H0: direct contribution ")
    bars.click(position={"x": 94, "y": 90})
    row.filter(has_text="L0H0 at query 40").wait_for(timeout=5_000)
    assert explorer.locator(".gptlib-head-button", has_text="L0H0").get_attribute("aria-pressed") == "true"

    numbers = explorer.locator(".gptlib-stream-numbers")
    numbers.locator("summary").focus()
    numbers.locator("summary").press("Enter")  # every bar's number, for the keyboard too
    assert numbers.locator("tbody tr").count() == 26 + 2
    assert numbers.locator("tbody tr").nth(2).inner_text().startswith("L0H0\t")

    # WCAG 2.1 A and AA on what the explorer's cell shows (the rest is JupyterLab's own chrome)
    assert violations(page, include=[".jp-OutputArea-child:has(.gptlib-stream-explorer)"]) == []

    explorer.locator(".gptlib-stream-mode input[value=character]").check()
    character = explorer.locator(".gptlib-stream-character")
    character.fill("t")
    character.press("Enter")  # a new character: the kernel splits its logit
    caption.filter(has_text="Direct contributions to z('t') at position 40").wait_for(timeout=30_000)

    box = offset_in(explorer, bars)
    character.fill("é")
    character.press("Enter")
    message.filter(has_text="Cannot draw: the character must be one character of the 65-character vocabulary, "
                            "got 'é'").wait_for(timeout=30_000)
    assert "gptlib-stale" in bars.get_attribute("class") and "z('t')" in caption.inner_text()
    character.fill("t")
    character.press("Enter")
    message.filter(has_text="55 characters, position 40, character").wait_for(timeout=30_000)
    text = explorer.locator(".gptlib-stream-text")
    text.fill("<!--<script>")
    message.filter(has_text="'<', '>'").wait_for(timeout=30_000)
    assert "last valid input" in message.inner_text() and "Traceback" not in explorer.inner_text()
    assert offset_in(explorer, bars) == box  # nothing moved: the picture stays where it was
    assert message.bounding_box()["y"] < bars.bounding_box()["y"]  # the reason sits above the picture


def test_the_static_copy_runs_alone_moves_in_one_frame_and_survives_hostile_text(page, tmp_path):
    """The copy a book or a saved HTML page shows: the module on the saved values, no kernel; a refused
    '<!--<script>' (and the same text in a saved value) neither ends its script nor shows in it."""
    from gptlib import pretrained
    from gptlib.viz.stream import StreamExplorer

    explorer = StreamExplorer(pretrained.load_pretrained("shakespeare"), "ROMEO:\nBut soft", position=8)
    explorer.text = "<!--<script>"  # refused: the copy keeps the last readable text
    explorer.last_drawn = {**explorer.last_drawn, "message": "<!--<script></script>"}
    bundle, _ = explorer._repr_mimebundle_()
    saved = tmp_path / "saved.html"
    saved.write_text('<!doctype html><html lang="en"><head><meta charset="utf-8"><title>saved explorer</title></head>'
                     f'<body><main>{bundle["text/html"]}<p id="after">after the copy</p></main></body></html>')
    page.goto(saved.as_uri())
    copy = page.locator(".gptlib-static .gptlib-stream-explorer")
    copy.wait_for(timeout=30_000)
    assert page.locator("#after").inner_text() == "after the copy"  # the page goes on after the script
    assert copy.locator(".gptlib-stream-text").input_value() == "ROMEO:\nBut soft"
    assert copy.locator(".gptlib-stream-text").get_attribute("readonly") is not None  # no kernel to run new text
    caption = copy.locator(".gptlib-stream-caption")
    assert caption.inner_text() == explorer.descriptions[0][8]  # the PNG's alt text, written once by the kernel
    position = copy.locator(".gptlib-stream-position input[type=range]")
    position.focus()
    one_frame(copy, lambda: position.press("ArrowLeft"))
    assert caption.inner_text() == explorer.descriptions[0][7]
    assert violations(page) == []  # WCAG 2.1 A and AA, the whole page
