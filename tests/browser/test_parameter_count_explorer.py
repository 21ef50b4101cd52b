"""Notebook 05's parameter-count explorer, typed into as a learner would."""

from gptlib import COURSE_CONFIG, theorem_5_2
from tests.support.browser.jupyterlab_driver import (
    frame_ms,
    offset_in,
    open_explorer,
    run_code,
)


def test_count_explorer_counts_in_the_page_refuses_in_words_and_hears_the_measured_count(page, lab):
    explorer = open_explorer(page, lab, "05_gpt_and_parameter_count.ipynb", "ParameterCountExplorer()", "gptlib-count",
                             run="explorer = ParameterCountExplorer()")
    theorem, measured = explorer.locator(".gptlib-count-theorem"), explorer.locator(".gptlib-count-message")
    measured.filter(has_text="Kernel: measured 816,640 equals Theorem 5.2's 816,640").wait_for(timeout=30_000)
    assert "Theorem 5.2: 816,640 parameters" in theorem.inner_text()
    table = explorer.locator(".gptlib-count-output")
    box = offset_in(explorer, table)

    width = explorer.locator(".gptlib-count-d input")
    assert width.get_attribute("aria-label") == "d, model width"
    width.fill("12.5")
    width.press("Enter")
    theorem.filter(has_text="d: 12.5 is not a whole number").wait_for(timeout=5_000)  # said by the page itself
    assert "gptlib-stale" in table.get_attribute("class") and "816,640" in table.inner_text()
    vocabulary = explorer.locator(".gptlib-count-V input")
    width.fill("128")
    vocabulary.fill("1e19")
    vocabulary.press("Enter")
    theorem.filter(has_text="V must be an integer <= 9223372036854775807, got 1e19").wait_for(timeout=5_000)
    measured.filter(has_text="V must be an integer <= 9223372036854775807, got 1e19").wait_for(timeout=30_000)
    vocabulary.fill("9" * 400)
    vocabulary.press("Enter")
    theorem.filter(has_text="got 999999999999…(400 characters)").wait_for(timeout=5_000)
    assert offset_in(explorer, table) == box and "Traceback" not in explorer.inner_text()  # nothing jumped

    vocabulary.fill("65")
    heads = explorer.locator(".gptlib-count-H input")
    heads.fill("5")
    heads.press("Enter")
    theorem.filter(has_text="H must divide d").wait_for(timeout=5_000)
    heads.fill("8")
    frame_ms(explorer, lambda: heads.press("Enter"))
    # the count does not move with H, and the page says so beside the sizes it counted
    assert "Theorem 5.2: 816,640 parameters at V=65, T_max=64, d=128, H=8, L=4 (H splits d into heads and moves " \
           "no parameter)" in theorem.inner_text()
    measured.filter(has_text="Kernel: measured 816,640 equals").wait_for(timeout=30_000)
    explorer.locator(".gptlib-count-tie input").check()
    # Exercise 5: tying removes W_U, d V = 128 * 65 = 8,320 parameters
    theorem.filter(has_text=f"Theorem 5.2: {816_640 - 128 * 65:,} parameters").wait_for(timeout=5_000)
    measured.filter(has_text=f"Kernel: measured {816_640 - 128 * 65:,} equals").wait_for(timeout=30_000)

    # typed from code: the boxes follow, and the kernel answers what it was given, never "Measuring" for ever
    run_code(page, 'explorer.type_in("L", "6")')
    assert explorer.locator(".gptlib-count-L input").input_value() == "6"
    six_blocks_tied = theorem_5_2(COURSE_CONFIG.replace(L=6, tie_weights=True))
    measured.filter(has_text=f"Kernel: measured {six_blocks_tied:,} equals").wait_for(timeout=30_000)
    run_code(page, 'explorer.typed = {**explorer.typed, "V": 65}')  # not text: what a hostile page could send
    measured.filter(has_text="Kernel: Cannot draw: invalid configuration: V: a size box holds text (a str), got 65").wait_for(
        timeout=30_000)
