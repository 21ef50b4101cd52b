"""Notebook 01's attention explorer, used in JupyterLab with the keyboard and the pointer as a learner would."""

from tests.support.browser.jupyterlab_driver import (
    frame_ms,
    offset_in,
    open_explorer,
)

ACTIVE_CELL = "() => window.jupyterapp.shell.currentWidget.content.activeCellIndex"
# Every text length A^h is drawn for, in order (its text alternative says "over N characters"; it is
# set at every frame, so a length repeats while other controls move).
DRAWN_LENGTHS = """(canvas) => {
    window.__drawnLengths = [];
    new MutationObserver(() => window.__drawnLengths.push(
        Number(/over (\\d+) characters/.exec(canvas.getAttribute('aria-label'))[1])
    )).observe(canvas, {attributes: true, attributeFilter: ['aria-label']});
}"""


def test_layer_head_hover_and_all_heads_answer_in_the_page_and_bad_text_keeps_the_picture(page, lab):
    explorer = open_explorer(page, lab, "01_multi_head_attention.ipynb", "AttentionExplorer(", "gptlib-attn-explorer")
    message = explorer.locator(".gptlib-attn-message")
    layer = explorer.locator(".gptlib-attn-layer input[type=range]")
    head = explorer.locator(".gptlib-attn-head input[type=range]")
    layer.focus()
    active = page.evaluate(ACTIVE_CELL)

    frame_ms(explorer, lambda: layer.press("ArrowRight"))  # drawn in the page from the numbers it holds
    assert "layer 1, head 0" in message.inner_text() and layer.get_attribute("aria-valuetext") == "layer 1 (of 0 to 3)"
    head.focus()
    frame_ms(explorer, lambda: head.press("ArrowRight"))
    frame_ms(explorer, lambda: head.press("ArrowRight"))
    assert "layer 1, head 2" in message.inner_text()
    assert page.evaluate(ACTIVE_CELL) == active  # JupyterLab took none of the keys

    heat = explorer.locator("canvas.gptlib-attn-output")
    heat.hover(position={"x": 200, "y": 300})
    assert explorer.locator(".gptlib-tip").first.inner_text().startswith("query ")
    assert "strongest key" in heat.get_attribute("aria-label")
    explorer.locator("canvas.gptlib-attn-norms").hover(position={"x": 40, "y": 100})
    assert explorer.locator(".gptlib-tip").nth(1).inner_text().startswith("head 0, position ")
    heads = explorer.locator(".gptlib-head-button")
    assert heads.count() == 4 and heads.nth(2).get_attribute("aria-pressed") == "true"
    heads.nth(3).click()  # the all-heads view: a click focuses that head, drawn in the next animation frame
    message.filter(has_text="layer 1, head 3").wait_for(timeout=5_000)
    assert heads.nth(3).get_attribute("aria-pressed") == "true"

    text = explorer.locator(".gptlib-attn-text")
    text.fill("To be, or not to be")
    message.filter(has_text="19 characters, layer 1, head 3").wait_for(timeout=30_000)  # the kernel ran the new text

    # typed a key at a time, faster than the kernel answers: one key alone is drawn at once; then keys 20 ms
    # apart, of which those within one animation frame are drawn together (a frame may take longer than 20 ms
    # on a busy machine): each text drawn after the first is a later one, and the last drawn is the box's last text
    heat.evaluate(DRAWN_LENGTHS)
    text.press("Control+End")
    text.press(" ")
    message.filter(has_text="20 characters, layer 1, head 3").wait_for(timeout=30_000)
    text.press_sequentially("that is the question", delay=20)
    message.filter(has_text="40 characters, layer 1, head 3").wait_for(timeout=30_000)
    lengths = page.evaluate("window.__drawnLengths")
    drawn = [n for i, n in enumerate(lengths) if i == 0 or n != lengths[i - 1]]
    assert 20 in drawn and drawn[-1] == 40 and drawn == sorted(set(drawn)), drawn
    assert text.input_value() == "To be, or not to be that is the question"

    box = offset_in(explorer, heat)
    text.fill("naïve café")
    message.filter(has_text="Cannot draw").wait_for(timeout=30_000)
    assert "'é'" in message.inner_text() and "'ï'" in message.inner_text()
    assert "last valid input" in message.inner_text() and "Traceback" not in explorer.inner_text()
    assert "gptlib-stale" in heat.get_attribute("class")
    assert offset_in(explorer, heat) == box  # nothing moved: the picture stays where it was
    assert message.bounding_box()["y"] < heat.bounding_box()["y"]  # the reason sits above the picture
