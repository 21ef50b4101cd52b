"""The static book in a real browser, served from a local file server as a reader would open it."""

import sys
import urllib.error
import urllib.request
from urllib.parse import unquote, urldefrag, urljoin

import pytest

from tests.support.browser.axe_audit import violations
from tests.support.browser.jupyterlab_driver import explorers_per_cell, frame_ms, saved, saved_count_counts_six_blocks
from tests.support.browser.servers import free_port, offline_context, serve
from tests.support.browser.static_pages import (
    ATTENTION_NUMBERS,
    STREAM_NUMBERS,
    TYPED,
    offline_static_page,
    tolerance,
    typed_into,
)

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
        page.goto(url)
        page.evaluate("() => window.gptlibMath")  # resolves once the math is typeset (book/_static/mathjax_after_explorers.js)
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
        cells = 2 if name == "08_trained_model_tour" else 1  # 08: the next-character and the attention explorer
        assert book_pages["pages"][urljoin(book_site, f"{name}.html")]["explorers per cell"] == [1] * cells, name


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


@pytest.mark.parametrize("opened", ["server", "file"])
def test_typed_text_in_the_books_explorers_is_run_in_the_page_as_torch_runs_it(browser, book_site, book_html, course, opened):
    """Notebooks 01, 08 and 10's explorers in the book, the network blocked, served and opened from the file system:
    text typed into them is run by the page, and the numbers drawn are torch's for that text."""
    import torch

    from gptlib import encode
    from gptlib.viz.attention import AttentionExplorer, attention_run
    from gptlib.viz.next_character import next_character_distribution
    from gptlib.viz.stream import StreamExplorer

    base = book_site if opened == "server" else book_html.as_uri() + "/"
    context, page, problems = offline_static_page(browser)
    for name in ("01_multi_head_attention", "08_trained_model_tour"):
        page.goto(urljoin(base, f"{name}.html"))
        explorer, text = typed_into(page, "gptlib-attn-explorer", TYPED)
        seen = explorer.evaluate(ATTENTION_NUMBERS)
        run = attention_run(course, text)
        T = len(text)
        assert seen["T"] == T
        page_A = torch.tensor(seen["A"]).reshape(run.A.shape)
        assert torch.allclose(page_A, run.A, atol=1e-6, rtol=0), (name, (page_A - run.A).abs().max())
        assert torch.allclose(torch.tensor(seen["norms"]).reshape(run.write_norms.shape), run.write_norms, rtol=0,
                              atol=tolerance(run.write_norms)), name
        explorer.locator("textarea").press("~")  # outside the vocabulary: the kernel's sentence, the picture kept
        kernel = AttentionExplorer(course, text=text)
        kernel.text = text + "~"
        explorer.locator(".gptlib-attn-message").filter(has_text=kernel.message).wait_for(timeout=10_000)
        assert "gptlib-stale" in explorer.locator(".gptlib-attn-output").get_attribute("class")

    next_explorer, prompt = typed_into(page, "gptlib-next-explorer", "Wh")  # 08's next-character explorer
    seen = next_explorer.evaluate("(root) => ({...root.gptlibData, probabilities: Array.from(root.gptlibData.probabilities)})")
    with torch.no_grad():
        z = course(encode(prompt))[-1].double()
    page_z = torch.tensor(seen["logits"], dtype=torch.float64)
    assert torch.allclose(page_z, z, rtol=0, atol=tolerance(z))
    kept = page_z.argsort(descending=True, stable=True)[: seen["topK"]]
    expected = torch.zeros_like(page_z)
    expected[kept] = torch.softmax(page_z[kept] / seen["temperature"], dim=-1)
    assert torch.allclose(torch.tensor(seen["probabilities"], dtype=torch.float64), expected, rtol=0, atol=1e-6)
    assert torch.allclose(expected, next_character_distribution(course, prompt, seen["temperature"], seen["topK"]),
                          rtol=0, atol=1e-4)  # the kernel's own bars, from torch's logits

    page.goto(urljoin(base, "10_reading_the_residual_stream.html"))
    stream, text = typed_into(page, "gptlib-stream-explorer", TYPED)
    seen = stream.evaluate(STREAM_NUMBERS)
    kernel = StreamExplorer(course, text, character=stream.locator(".gptlib-stream-character").input_value())
    expected = torch.frombuffer(bytearray(kernel.values), dtype=torch.float32).reshape(3, len(text), -1)
    values = torch.tensor(seen["values"], dtype=torch.float32)
    assert values.shape == expected.shape and torch.equal(values.isnan(), expected.isnan())
    finite = ~expected.isnan()
    assert torch.allclose(values[finite], expected[finite], rtol=0, atol=tolerance(expected[finite]))
    context.close()
    assert not problems



# When the first explorer of page 01 runs its model and when MathJax puts its first formula into the page.
ORDER = """(() => { const seen = (window.gptlibOrder = {});
  new MutationObserver(() => {
    const explorer = document.querySelector('.gptlib-static .gptlib-attn-explorer');
    if (seen.ready === undefined && explorer?.dataset.pageModel === 'ready') seen.ready = performance.now();
    if (seen.typeset === undefined && document.querySelector('mjx-container')) seen.typeset = performance.now();
  }).observe(document, { subtree: true, childList: true, attributes: true }); })();"""


@pytest.mark.parametrize("opened", ["server", "file"])
def test_a_books_page_reads_its_weights_once_and_typesets_its_math_after_its_explorers(browser, book_site, book_html, opened):
    """Page 01, served and from the file system: gpt.js's text and the weights are requested once each (the head's
    preload and the explorer's own request are one; book/preload_weights.py), and the math is typeset only once
    the explorer runs its model (book/_static/mathjax_after_explorers.js), so MathJax's long task never delays it."""
    base = book_site if opened == "server" else book_html.as_uri() + "/"
    context, page, problems = offline_static_page(browser)
    page.add_init_script(ORDER)
    requested = []
    page.on("request", lambda request: "gptlib-weights/" in request.url and requested.append(request.url.rsplit("/", 1)[1]))
    page.goto(urljoin(base, "01_multi_head_attention.html"))
    page.evaluate("() => window.gptlibMath")
    seen = page.evaluate("() => ({ ...window.gptlibOrder, formulas: document.querySelectorAll('mjx-container').length })")
    context.close()
    assert not problems
    weights = [name for name in requested if name != "gpt-source.js"]
    assert requested.count("gpt-source.js") == 1 and len(weights) == 1, requested
    assert weights[0].endswith(".gptw" if opened == "server" else ".js")
    assert seen["formulas"] > 0 and seen["ready"] < seen["typeset"], seen
