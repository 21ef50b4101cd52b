"""`make app`: the three explorers served by Voila, each moved once as an instructor would."""

from axe_audit import violations
from jupyterlab_driver import explorers_per_cell, frame_ms, live

from gptlib import COURSE_CONFIG, theorem_5_2


def test_every_explorer_redraws_in_the_voila_app(page, voila_app):
    blocked = []  # Voila's template asks a CDN for Font Awesome: app/voila.json's policy stops it in the browser
    page.on("requestfailed", lambda request: request.url.startswith("https:") and blocked.append(request.failure))
    page.goto(voila_app, timeout=120_000)
    attention, sphere, count = (live(page, css) for css in ("gptlib-attn-explorer", "gptlib-sphere", "gptlib-count"))
    for explorer in (attention, sphere, count):
        explorer.wait_for(timeout=120_000)
    assert "load_pretrained" not in page.locator("body").inner_text()  # code hidden
    assert explorers_per_cell(page, ".jp-Cell") == [1, 1, 1]  # each the widget only, its static copy not beside it

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

    body = page.locator("body").inner_text()
    assert "Traceback" not in body and "error when executing" not in body
    assert page.locator("[data-mime-type='application/vnd.jupyter.stderr']").count() == 0
    assert violations(page) == []  # WCAG 2.1 A and AA, the whole page
    assert blocked and set(blocked) == {"csp"}  # refused before any network was asked, not left waiting
