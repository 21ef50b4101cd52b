"""The static book in a real browser, served from a local file server as a reader would open it."""

import sys
import urllib.error
import urllib.request
from urllib.parse import unquote, urldefrag, urljoin

import pytest

from tests.support.browser.axe_audit import violations
from tests.support.browser.jupyterlab_driver import explorers_per_cell, frame_ms, saved, saved_count_counts_six_blocks
from tests.support.browser.servers import free_port, offline_context, serve

PAGE_FACTS = """() => ({
    ids: [...document.querySelectorAll('[id]')].map(e => e.id),
    links: [...document.querySelectorAll('a[href]')].map(a => a.href),
    brokenImages: [...document.images].filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src),
    images: document.images.length,
    math: document.querySelectorAll('mjx-container').length,
    mathErrors: document.querySelectorAll('mjx-merror').length,
})"""


# What axe may not judge: sphinx-book-theme's search button, whose aria-label "Search" is shorter
# than its visible "Search Ctrl+K" (the theme's markup, which the book does not write). Everything
# else, myst-nb's hidden-cell toggles included (book/hidden_cells.py names them), is audited.
THEME_CHROME = [".search-button-field"]


@pytest.fixture(scope="module")
def book_site(book_html, tmp_path_factory):
    port = free_port()
    cmd = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(book_html)]
    base = f"http://127.0.0.1:{port}/"
    with serve(cmd, base, tmp_path_factory.mktemp("book-server") / "server.log"):
        yield base


EXPLORER_PAGES = ["01_multi_head_attention", "04_layernorm_geometry", "05_gpt_and_parameter_count", "08_trained_model_tour"]


@pytest.fixture(scope="module")
def book_pages(browser, book_site, book_html) -> dict:
    """Every page of the book opened once, in one browser page (a page load and its audit are most of
    this file's cost): url -> what it holds (PAGE_FACTS), what axe finds there (THEME_CHROME left out)
    and, on an explorer page, explorers per cell; under "problems", what the browser reported wrong
    while loading them (console errors, failed requests, HTTP errors, uncaught exceptions)."""
    context = offline_context(browser)
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda msg: msg.type == "error" and problems.append(f"console: {msg.text}"))
    page.on("requestfailed", lambda request: problems.append(f"failed: {request.url}"))
    page.on("response", lambda response: response.status >= 400 and problems.append(f"{response.status}: {response.url}"))
    page.on("pageerror", lambda exc: problems.append(f"uncaught: {exc}"))
    pages = {}
    for html in sorted(book_html.glob("*.html")):
        url = urljoin(book_site, html.name)
        page.goto(url)  # waits for the load event, after which the deferred MathJax script has run
        page.evaluate("() => window.MathJax?.startup?.promise")  # resolves once the math is typeset
        pages[url] = page.evaluate(PAGE_FACTS) | {"audit": violations(page, exclude=THEME_CHROME)}
        if html.stem in EXPLORER_PAGES:
            pages[url]["explorers per cell"] = explorers_per_cell(page, "div.cell")
    context.close()
    return {"pages": pages, "problems": problems}


def test_every_page_loads_without_an_error_with_its_images_and_math(book_pages, book_site):
    assert not book_pages["problems"]
    for url, seen in book_pages["pages"].items():
        assert not seen["brokenImages"], f"{url}: images not decoded"
        assert not seen["mathErrors"], f"{url}: MathJax could not typeset"
    for name in ("04_layernorm_geometry", "05_gpt_and_parameter_count"):
        seen = book_pages["pages"][urljoin(book_site, f"{name}.html")]
        assert seen["images"] > 0 and seen["math"] > 0, name


def test_every_page_passes_an_accessibility_audit(book_pages):
    """WCAG 2.1 A and AA (axe) on each page, the theme's chrome (THEME_CHROME) left out."""
    assert {url: seen["audit"] for url, seen in book_pages["pages"].items() if seen["audit"]} == {}


def status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def test_every_link_within_the_site_resolves(book_pages, book_site):
    """A link to a page names an anchor that page holds; a link to another file (the notebook and
    source downloads) gets it."""
    pages = book_pages["pages"]
    downloads = {}
    for url, seen in pages.items():
        for link in seen["links"]:
            target, fragment = urldefrag(link)
            if not target.startswith(book_site):
                continue
            if target in pages:
                assert not fragment or unquote(fragment) in pages[target]["ids"], f"{url} links to a missing anchor {link}"
            else:
                downloads.setdefault(target, status(target))
                assert downloads[target] == 200, f"{url} links to {link}"


def test_each_explorer_cell_of_the_book_shows_one_explorer(book_pages, book_site):
    """Its static copy, drawn by its module: the widget view beside it in the same output is never chosen."""
    for name in EXPLORER_PAGES:
        assert book_pages["pages"][urljoin(book_site, f"{name}.html")]["explorers per cell"] == [1], name


def test_search_finds_a_lecture_term(page, book_site):
    page.goto(urljoin(book_site, "search.html?q=LayerNorm"))
    results = page.locator("#search-results ul.search li")
    results.first.wait_for(timeout=30_000)
    assert results.count() >= 3


def test_the_books_explorers_move_without_a_kernel_and_pass_an_accessibility_audit(page, book_site):
    """The explorers in the book run on the values saved with the notebook: no kernel, no server code."""
    page.goto(urljoin(book_site, "04_layernorm_geometry.html"))
    sphere = saved(page, "gptlib-sphere")
    turn = sphere.locator(".gptlib-sphere-turn input[type=range]")
    frame_ms(sphere, lambda: turn.press("ArrowRight"))
    assert turn.get_attribute("aria-valuetext") == "35" and "cu = (" in sphere.locator(".gptlib-sphere-readout").inner_text()
    assert violations(page, exclude=THEME_CHROME) == []  # with the explorer drawn and moved

    page.goto(urljoin(book_site, "05_gpt_and_parameter_count.html"))
    saved_count_counts_six_blocks(page)

    page.goto(urljoin(book_site, "01_multi_head_attention.html"))
    attention = saved(page, "gptlib-attn-explorer")
    head = attention.locator(".gptlib-attn-head input[type=range]")
    frame_ms(attention, lambda: head.press("ArrowRight"))
    assert "head 1" in attention.locator(".gptlib-attn-message").inner_text()
