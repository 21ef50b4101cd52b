"""Notebook 05's parameter-count explorer, typed into as a learner would."""

from jupyterlab_driver import (
    offset_in,
    open_and_run_all,
    picture,
    picture_digest,
    round_trip_ms,
)


def test_count_explorer_refuses_in_words_keeps_its_picture_and_counts_tied(page, lab):
    open_and_run_all(page, lab, "05_gpt_and_parameter_count.ipynb")
    explorer = page.locator(".gptlib-count").first
    explorer.scroll_into_view_if_needed()
    message = explorer.locator(".gptlib-count-message")
    message.filter(has_text="816,640").wait_for(timeout=30_000)  # Theorem 5.2; drawn once the cell is in view
    image = explorer.locator(picture("gptlib-count-output")).first
    shown, box = picture_digest(page, "gptlib-count-output"), offset_in(explorer, image)

    width = explorer.locator(".gptlib-count-d input")
    width.fill("12.5")
    width.press("Enter")
    message.filter(has_text="12.5 is not a whole number").wait_for(timeout=30_000)
    heads = explorer.locator(".gptlib-count-H input")
    width.fill("128")
    heads.fill("5")
    heads.press("Enter")
    message.filter(has_text="H must divide d").wait_for(timeout=30_000)
    assert picture_digest(page, "gptlib-count-output") == shown and "gptlib-stale" in image.get_attribute("class")
    assert offset_in(explorer, image) == box and "Traceback" not in explorer.inner_text()

    heads.fill("8")
    round_trip_ms(page, "gptlib-count-output", lambda: heads.press("Enter"))  # fails on a blank frame
    message.filter(has_text="measured 816,640 equals").wait_for(timeout=30_000)
    explorer.locator(".gptlib-count-tie input").check()
    # Exercise 5: tying removes W_U, d V = 128 * 65 = 8,320 parameters
    message.filter(has_text=f"measured {816_640 - 128 * 65:,} equals").wait_for(timeout=30_000)
