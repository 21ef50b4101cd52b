"""The static book in a real browser, served from a local file server as a reader would open it."""

import sys
from urllib.parse import unquote, urldefrag, urljoin

import pytest
from axe_audit import violations
from jupyterlab_driver import explorers_per_cell, frame_ms, saved, saved_count_counts_six_blocks
from servers import free_port, serve

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


def open_page(page, url: str) -> dict:
    page.goto(url)  # waits for the load event, after which the deferred MathJax script has run
    page.evaluate("() => window.MathJax?.startup?.promise")  # resolves once the math is typeset
    return page.evaluate(PAGE_FACTS)


def test_every_page_loads_with_images_math_and_resolving_links_and_passes_an_audit(page, book_site, book_html):
    """Every page, and WCAG 2.1 A and AA (axe) on each, the theme's chrome (THEME_CHROME) left out."""
    problems: list[str] = []
    page.on("console", lambda msg: msg.type == "error" and problems.append(f"console: {msg.text}"))
    page.on("requestfailed", lambda request: problems.append(f"failed: {request.url}"))
    page.on("response", lambda response: response.status >= 400 and problems.append(f"{response.status}: {response.url}"))

    facts = {}
    for html in sorted(book_html.glob("*.html")):
        url = urljoin(book_site, html.name)
        facts[url] = open_page(page, url)
        assert not facts[url]["brokenImages"], f"{html.name}: images not decoded"
        assert not facts[url]["mathErrors"], f"{html.name}: MathJax could not typeset"
        problems += [f"{html.name}: {found}" for found in violations(page, exclude=THEME_CHROME)]
    assert not problems

    for name in ("04_layernorm_geometry", "05_gpt_and_parameter_count"):
        url = urljoin(book_site, f"{name}.html")
        assert facts[url]["images"] > 0 and facts[url]["math"] > 0, name

    downloads = {}  # links to files that are not pages: the notebook and source downloads
    for url, seen in facts.items():
        for link in seen["links"]:
            target, fragment = urldefrag(link)
            if not target.startswith(book_site):
                continue
            if target in facts:
                assert not fragment or unquote(fragment) in facts[target]["ids"], f"{url} links to a missing anchor {link}"
            else:
                downloads.setdefault(target, page.request.get(target).status)
                assert downloads[target] == 200, f"{url} links to {link}"


def test_search_finds_a_lecture_term(page, book_site):
    page.goto(urljoin(book_site, "search.html?q=LayerNorm"))
    results = page.locator("#search-results ul.search li")
    results.first.wait_for(timeout=30_000)
    assert results.count() >= 3


EXPLORER_PAGES = ["01_multi_head_attention", "04_layernorm_geometry", "05_gpt_and_parameter_count", "08_trained_model_tour"]


def test_each_explorer_cell_of_the_book_shows_one_explorer(page, book_site):
    """Its static copy, drawn by its module: the widget view beside it in the same output is never chosen."""
    for name in EXPLORER_PAGES:
        page.goto(urljoin(book_site, f"{name}.html"))
        assert explorers_per_cell(page, "div.cell") == [1], name


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
