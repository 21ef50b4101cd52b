"""`make app`: the three explorers served by Voila, each moved once as an instructor would."""

from jupyterlab_driver import image_source, wait_for_new_image

OUTPUTS = ("gptlib-attn-output", "gptlib-sphere-output", "gptlib-count-output")


def test_every_explorer_redraws_in_the_voila_app(page, voila_app):
    page.goto(voila_app, timeout=120_000)
    first = {css: image_source(page, css, timeout_ms=120_000) for css in OUTPUTS}
    assert "load_pretrained" not in page.locator("body").inner_text()  # code hidden
    static = page.locator(".jp-OutputArea-child:has(+ .jp-OutputArea-child .gptlib-explorer) img")
    assert static.count() == 3 and not any(static.nth(i).is_visible() for i in range(3))  # each figure shown once

    head = page.locator(".gptlib-attn-head .noUi-handle").first
    head.focus()
    head.press("ArrowRight")
    head.press("ArrowRight")
    page.locator(".gptlib-attn-message").first.filter(has_text="head 2").wait_for(timeout=30_000)
    wait_for_new_image(page, "gptlib-attn-output", first["gptlib-attn-output"])
    assert "layer 0, head 2" in page.locator(".gptlib-attn-message").first.inner_text()

    handle = page.locator(".gptlib-sphere-turn .noUi-handle").first
    handle.focus()
    handle.press("ArrowRight")
    wait_for_new_image(page, "gptlib-sphere-output", first["gptlib-sphere-output"])

    layers = page.locator(".gptlib-count-L input").first
    layers.fill("6")
    layers.press("Enter")
    wait_for_new_image(page, "gptlib-count-output", first["gptlib-count-output"])
    assert "equals Theorem 5.2" in page.locator(".gptlib-count-message").first.inner_text()

    body = page.locator("body").inner_text()
    assert "Traceback" not in body and "error when executing" not in body
    assert page.locator("[data-mime-type='application/vnd.jupyter.stderr']").count() == 0
