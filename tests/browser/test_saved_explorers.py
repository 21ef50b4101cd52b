"""A saved notebook opened without running it: each explorer cell still shows a picture."""

import pytest

EXPLORER_CELLS = {
    "01_multi_head_attention.ipynb": "AttentionExplorer(",
    "04_layernorm_geometry.ipynb": "LayerNormSphere()",
    "05_gpt_and_parameter_count.ipynb": "ParameterCountExplorer()",
}


@pytest.mark.parametrize("notebook, source", EXPLORER_CELLS.items())
def test_an_unrun_explorer_cell_shows_its_picture(page, lab, notebook, source):
    base, token = lab
    page.goto(f"{base}/lab/tree/{notebook}?token={token}&reset")
    cell = page.locator(".jp-CodeCell", has=page.locator(".jp-InputArea", has_text=source)).first
    cell.wait_for(timeout=120_000)
    cell.scroll_into_view_if_needed()
    pictures = cell.locator(".jp-OutputArea-output img")
    pictures.first.wait_for(timeout=30_000)
    shown = [pictures.nth(i) for i in range(pictures.count()) if pictures.nth(i).is_visible()]
    assert len(shown) == 1  # the static copy, or the widget drawn from its saved state: never none, never two
    assert shown[0].evaluate("img => img.complete && img.naturalWidth > 200")
