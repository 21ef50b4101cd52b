"""Notebook 05's parameter-count explorer, typed into as a learner would."""

from jupyterlab_driver import open_and_run_all


def test_count_explorer_reports_invalid_heads_and_tied_count(page, lab):
    open_and_run_all(page, lab, "05_gpt_and_parameter_count.ipynb")
    message = page.locator(".gptlib-count-message").first
    message.scroll_into_view_if_needed()
    assert "816,640" in message.inner_text()  # Theorem 5.2, course configuration

    heads = page.locator(".gptlib-count-H input").first
    heads.fill("5")
    heads.press("Enter")
    message.filter(has_text="H must divide d").wait_for(timeout=30_000)
    assert "Traceback" not in page.locator(".gptlib-count-output").first.inner_text()

    heads.fill("8")
    heads.press("Enter")
    message.filter(has_text="measured 816,640 equals").wait_for(timeout=30_000)

    page.locator(".gptlib-count-tie input").first.check()
    # Exercise 5: tying removes W_U, d V = 128 * 65 = 8,320 parameters
    message.filter(has_text=f"measured {816_640 - 128 * 65:,} equals").wait_for(timeout=30_000)
