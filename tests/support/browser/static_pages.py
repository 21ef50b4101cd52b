"""Static pages (the book's, a single-file export's) in a browser: typing into an explorer's static copy once the
page runs its model, and the numbers it drew (each explorer exposes them on its root, gptlibData)."""

from tests.support.browser.servers import offline_context

TYPED = "\nAy"  # typed at the end of each explorer's saved text (the longest, 01's, then holds 60 of T_max = 64)
ATTENTION_NUMBERS = """(root) => ({A: Array.from(root.gptlibData.A), norms: Array.from(root.gptlibData.norms),
                                   T: root.gptlibData.T})"""
STREAM_NUMBERS = """(root) => { const d = root.gptlibData;
    return {T: d.T, n: d.n, values: [0, 1, 2].map((m) => Array.from({length: d.T}, (_, t) => Array.from(d.split(m, t))))}; }"""


def typed_into(page, css_class: str, typed: str) -> tuple:
    """A page's static copy of an explorer once the page runs its model, with `typed` typed at the end of its text
    (one key at a time, as a reader types); returns (the explorer, its text box's text)."""
    explorer = page.locator(f".gptlib-static .{css_class}").first
    explorer.scroll_into_view_if_needed()
    page.wait_for_function(f"() => document.querySelector('.gptlib-static .{css_class}')?.dataset.pageModel === 'ready'",
                           timeout=30_000)
    box = explorer.locator("textarea")
    box.focus()
    box.press("Control+End")
    for key in typed:
        box.press("Enter" if key == "\n" else key)
    text = box.input_value()
    page.wait_for_function("([root, T]) => root.gptlibData && root.gptlibData.T === T",
                           arg=[explorer.element_handle(), len(text)], timeout=10_000)
    page.wait_for_timeout(100)  # the frame that draws the last key
    return explorer, text


def tolerance(reference) -> float:
    """Item 2's bound on logits and stream writes: 1e-5 (1 + max |x|)."""
    return 1e-5 * (1 + float(reference.abs().max()))


def offline_static_page(browser):
    """A page that reaches nothing but a local server or file (offline_context), with what it reports wrong."""
    context = offline_context(browser)
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda msg: msg.type == "error" and problems.append(f"console: {msg.text}"))
    page.on("pageerror", lambda exc: problems.append(f"uncaught: {exc}"))
    page.on("requestfailed", lambda request: problems.append(f"failed: {request.url}"))
    return context, page, problems
