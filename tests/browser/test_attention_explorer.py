"""Notebook 01's attention explorer, used in JupyterLab as a learner would."""

from jupyterlab_driver import image_source, open_and_run_all, wait_for_new_image


def test_explorer_redraws_on_new_text_head_and_layer(page, lab):
    open_and_run_all(page, lab, "01_multi_head_attention.ipynb")
    explorer = page.locator(".gptlib-attn-explorer").first
    explorer.scroll_into_view_if_needed()
    first = image_source(page, "gptlib-attn-output")

    explorer.locator(".gptlib-attn-text textarea").fill("To be, or not to be")
    after_text = wait_for_new_image(page, "gptlib-attn-output", first)
    assert "19 characters" in explorer.locator(".gptlib-attn-message").inner_text()

    explorer.locator(".gptlib-attn-head select").select_option(label="2")
    after_head = wait_for_new_image(page, "gptlib-attn-output", after_text)

    explorer.locator(".gptlib-attn-layer select").select_option(label="3")
    wait_for_new_image(page, "gptlib-attn-output", after_head)
    assert "layer 3, head 2" in explorer.locator(".gptlib-attn-message").inner_text()


def test_explorer_names_characters_outside_the_vocabulary(page, lab):
    open_and_run_all(page, lab, "01_multi_head_attention.ipynb")
    explorer = page.locator(".gptlib-attn-explorer").first
    explorer.locator(".gptlib-attn-text textarea").fill("naïve café")
    message = explorer.locator(".gptlib-attn-message")
    message.filter(has_text="Cannot draw").wait_for(timeout=30_000)
    assert "'é'" in message.inner_text() and "'ï'" in message.inner_text()
    assert explorer.locator(".gptlib-attn-output img").count() == 0
    assert "Traceback" not in explorer.inner_text()
