"""A saved explorer whose weights file is missing, truncated, corrupted or of another model: the explorer says
what is wrong in one sentence, keeps its picture, and the page raises no error (the `page` fixture fails on any
uncaught one; console errors are checked here)."""

import pytest

from gptlib import pretrained
from gptlib.viz.attention import AttentionExplorer
from gptlib.viz.page_model import WEIGHTS_DIR, gpt_source_script, weights_script, write_shipped_weights
from gptlib.viz.page_weights import page_weights


@pytest.fixture(scope="module")
def saved_copy():
    explorer = AttentionExplorer(pretrained.load_pretrained("shakespeare"), text="ROMEO:\nBut soft")
    return explorer.static_html(explorer.static_png()), explorer.weights_key


def shipped() -> bytes:
    return page_weights(pretrained.load_pretrained("shakespeare"))


BAD_FILES = {  # the bytes the weights file holds (None: no file) -> words of the sentence the explorer shows
    "missing": (None, "is missing"),
    "truncated": (lambda: shipped()[: len(shipped()) // 2], "truncated"),
    "corrupted": (lambda: b"GPTX" + shipped()[4:], "not a gptlib weights file"),
    "of another model": (lambda: page_weights(pretrained.load_pretrained("induction")), "another model"),
}


def opened_and_refused(page, page_file, words: str) -> list[str]:
    """Open `page_file`; once its explorer has failed to read its weights, check that it says so in one sentence
    holding `words` over the picture it kept. Returns the console errors."""
    console = []
    page.on("console", lambda message: message.type == "error" and console.append(message.text))
    page.goto(page_file.as_uri())
    explorer = page.locator(".gptlib-static .gptlib-attn-explorer")
    page.wait_for_function("() => document.querySelector('.gptlib-attn-explorer')?.dataset.pageModel === 'failed'",
                           timeout=30_000)
    message = explorer.locator(".gptlib-attn-message").inner_text()
    assert words in message and message.count(". ") == 0, message  # one sentence
    assert explorer.locator(".gptlib-attn-output").get_attribute("aria-label").startswith("Attention pattern A^h")
    assert "gptlib-stale" not in explorer.locator(".gptlib-attn-output").get_attribute("class")  # the picture is kept
    assert explorer.locator(".gptlib-attn-text").get_attribute("readonly") is not None  # no model: no typing
    return console


@pytest.mark.parametrize("case", BAD_FILES)
def test_a_bad_weights_file_is_named_in_one_sentence_and_the_picture_stays(page, tmp_path, saved_copy, case):
    html, key = saved_copy
    make, words = BAD_FILES[case]
    write_shipped_weights(tmp_path / WEIGHTS_DIR)  # gpt.js's text and the good files, then the bad one in place
    (tmp_path / WEIGHTS_DIR / f"{key}.js").unlink()
    if make is not None:
        (tmp_path / WEIGHTS_DIR / f"{key}.js").write_text(weights_script(key, make()))
    (tmp_path / "page.html").write_text('<!doctype html><html lang="en"><head><meta charset="utf-8"><title>copy</title>'
                                        f"</head><body><main>{html}</main></body></html>")
    console = opened_and_refused(page, tmp_path / "page.html", words)
    # a missing file is the one console error: the browser's own line for the file it could not load
    assert console == ([] if make is not None else [console[0]]) and all("ERR_FILE_NOT_FOUND" in line for line in console)


EMBEDDED_BAD = {name: case for name, case in BAD_FILES.items() if case[0] is not None} | {
    "not base64": (None, "are corrupted: they are not base64"),
}


@pytest.mark.parametrize("case", EMBEDDED_BAD)
def test_bad_weights_embedded_in_a_single_file_page_are_named_in_one_sentence(page, tmp_path, saved_copy, case):
    """A page as `python -m gptlib html` writes it (gptlib.viz.page_export), nothing beside it, its embedded weights bad."""
    html, key = saved_copy
    make, words = EMBEDDED_BAD[case]
    not_base64 = f'(globalThis.gptlibWeights ??= {{}})["{key}"] = "@@ not base64 @@";'
    weights = weights_script(key, make()) if make is not None else not_base64
    (tmp_path / "page.html").write_text('<!doctype html><html lang="en"><head><meta charset="utf-8"><title>copy</title>'
                                        f"<script>{gpt_source_script()}{weights}</script></head>"
                                        f"<body><main>{html}</main></body></html>")
    console = opened_and_refused(page, tmp_path / "page.html", words)
    assert console == []
