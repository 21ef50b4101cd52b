"""What a book page with explorers loads, and how long it takes to its first picture and to the model in the page.

    python -m benchmarks.book_load BUILD/book/html

For the pages of notebooks 01, 08 and 10 (built by tools/build_book.py), served by a plain file server and opened
from the file system, in headless Chromium with the network blocked: the bytes the page loads (of which the
model's weights and gpt.js's text), the time from navigation to the first explorer's first frame (drawn from the
saved numbers) and to every model explorer's weights read (data-page-model="ready"), each the median of 3 loads.
This is a benchmark, not a test: nothing here fails on a slow machine.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from tests.support.browser.servers import CHROMIUM, CHROMIUM_ARGS, free_port, offline_context, serve

PAGES = ("01_multi_head_attention", "08_trained_model_tour", "10_reading_the_residual_stream")
LOADS = 3
WATCH = """(() => { window.gptlibLoad = {}; const check = () => { const seen = window.gptlibLoad;
  const copies = [...document.querySelectorAll('.gptlib-static .gptlib-explorer')];
  if (seen.picture === undefined && copies.some((e) => Number(e.dataset.frames) >= 1)) seen.picture = performance.now();
  const models = copies.filter((e) => e.matches('.gptlib-attn-explorer, .gptlib-stream-explorer, .gptlib-next-explorer'));
  const ready = models.length && models.every((e) => e.dataset.pageModel === 'ready');
  if (seen.ready === undefined && ready) seen.ready = performance.now();
  requestAnimationFrame(check); }; requestAnimationFrame(check); })();"""


def measure(browser, url: str) -> tuple[int, int, float, float]:
    """(bytes loaded, of which under gptlib-weights/, ms to the first picture, ms to the model ready) of one load."""
    context = offline_context(browser)
    page = context.new_page()
    page.add_init_script(WATCH)
    finished = []
    def on_finished(request):
        finished.append(request)

    page.on("requestfinished", on_finished)
    page.goto(url)
    page.wait_for_function("() => window.gptlibLoad.ready !== undefined", timeout=120_000)
    page.wait_for_timeout(300)  # what the page still loads after
    seen = page.evaluate("() => window.gptlibLoad")
    page.remove_listener("requestfinished", on_finished)
    loaded = [(request.url, request.sizes()["responseBodySize"]) for request in finished]  # before the page closes
    context.close()
    return (sum(size for _, size in loaded), sum(size for u, size in loaded if "gptlib-weights" in u),
            seen["picture"], seen["ready"])


def main() -> None:
    html = Path(sys.argv[1]).resolve()
    from playwright.sync_api import sync_playwright

    port = free_port()
    base = f"http://127.0.0.1:{port}/"
    cmd = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(html)]
    with serve(cmd, base, html.parent / "book_load_server.log"), sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        for name in PAGES:
            for where, url in (("server", f"{base}{name}.html"), ("file", (html / f"{name}.html").as_uri())):
                loads = [measure(browser, url) for _ in range(LOADS)]
                total, weights, picture, ready = (statistics.median(column) for column in zip(*loads))
                print(f"{name:32} {where:6} {total:>11,.0f} bytes ({weights:,.0f} of weights and gpt.js)  "
                      f"first picture {picture:5.0f} ms  model ready {ready:5.0f} ms", flush=True)
        browser.close()


if __name__ == "__main__":
    main()
