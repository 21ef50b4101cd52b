"""`make app`: the five explorers served by Voila, each moved once as an instructor would; the page
asks for nothing outside 127.0.0.1 and its console stays clean."""

import re

from gptlib import COURSE_CONFIG, theorem_5_2
from tests.support.browser.axe_audit import violations
from tests.support.browser.jupyterlab_driver import explorers_per_cell, frame_ms, live

# Webpack's notices that an extension was built against a newer JupyterLab than the 4.2.5 Voila 0.5.13
# bundles (jupyterlab_widgets and Voila's own widgets-manager8): the extension runs on 4.2.5, and no
# setting of the app can change either build. Every other console warning or error fails the test.
SHARED_MODULE_VERSION = re.compile(
    r"^(Unsatisfied version \S+ from \S+ of shared singleton module|No satisfying version \(\S+\) of shared module) @jupyterlab/"
)


def test_every_explorer_redraws_in_the_voila_app(page, voila_app):
    outside, console = [], []  # requests that leave 127.0.0.1; console warnings and errors
    page.on("request", lambda r: re.match(r"(https?|wss?)://(?!127\.0\.0\.1[:/])", r.url) and outside.append(r.url))
    page.on("console", lambda m: m.type in ("error", "warning") and not SHARED_MODULE_VERSION.match(m.text)
            and console.append(m.text))
    page.goto(voila_app, timeout=120_000)
    attention, sphere, count, stream, next_character = (live(page, css) for css in (
        "gptlib-attn-explorer", "gptlib-sphere", "gptlib-count", "gptlib-stream-explorer", "gptlib-next-explorer"))
    for explorer in (attention, sphere, count, stream, next_character):
        explorer.wait_for(timeout=120_000)
    assert "load_pretrained" not in page.locator("body").inner_text()  # code hidden
    assert explorers_per_cell(page, ".jp-Cell") == [1] * 5  # each the widget only, its static copy not beside it

    head = attention.locator(".gptlib-attn-head input[type=range]")
    frame_ms(attention, lambda: head.press("ArrowRight"))
    frame_ms(attention, lambda: head.press("ArrowRight"))
    assert "layer 0, head 2" in attention.locator(".gptlib-attn-message").inner_text()

    turn = sphere.locator(".gptlib-sphere-turn input[type=range]")
    frame_ms(sphere, lambda: turn.press("ArrowRight"))
    assert turn.get_attribute("aria-valuetext") == "35"

    six_blocks = theorem_5_2(COURSE_CONFIG.replace(L=6))
    layers = count.locator(".gptlib-count-L input")
    layers.fill("6")
    frame_ms(count, lambda: layers.press("Enter"))
    count.locator(".gptlib-count-message").filter(has_text=f"measured {six_blocks:,} equals Theorem 5.2").wait_for(timeout=30_000)

    position = stream.locator(".gptlib-stream-position input[type=range]")
    frame_ms(stream, lambda: position.press("ArrowRight"))
    assert "at position 40 after 'o'" in stream.locator(".gptlib-stream-caption").inner_text()
    text = stream.locator(".gptlib-stream-text")
    text.fill("ROMEO:\nBut soft, what light through yonder window breaks?")  # the kernel runs the new text
    stream.locator(".gptlib-stream-message").filter(has_text="57 characters, position 40").wait_for(timeout=30_000)

    # the model runs in the page (gptlib.viz.page_model): typed text is drawn without waiting for the kernel
    for explorer in (attention, stream, next_character):
        explorer.page.wait_for_function("(root) => root.dataset.pageModel === 'ready'", arg=explorer.element_handle(),
                                        timeout=30_000)
    prompt = next_character.locator(".gptlib-next-text")
    prompt.focus()
    prompt.press("Control+End")
    frame_ms(next_character, lambda: prompt.press("W"))
    assert "8 characters, temperature 1, top-k 65" in next_character.locator(".gptlib-next-message").inner_text()
    next_character.locator(".gptlib-next-sample-button").click()
    assert next_character.locator(".gptlib-next-sample").inner_text().startswith("ROMEO:\nW")

    body = page.locator("body").inner_text()
    assert "Traceback" not in body and "error when executing" not in body
    assert page.locator("[data-mime-type='application/vnd.jupyter.stderr']").count() == 0
    assert violations(page) == []  # WCAG 2.1 A and AA, the whole page
    assert outside == []  # app/jupyter/voila/templates/gptlib: Voila's page without its CDN stylesheets
    assert console == []
