"""How long gptlib/viz/js/gpt.js takes in headless Chromium on the course model (the shipped Shakespeare GPT).

    python -m benchmarks.page_model [--repeats 31]

Times reading the weights file (readWeights: parse, check, assemble) and, on a session that has run a
text of T_max characters, a change of its first character (all T_max positions recomputed), of its last
(one position) and deleting the last (nothing computed: the Run is copied out). For each: the median
and fastest wall time (performance.now in the page) and the mean CPU time of the page's main thread
(the DevTools Protocol's ThreadTime), which a machine loaded by other processes does not inflate.
"""

from __future__ import annotations

import argparse
import os

from benchmarks.roundtrip import cpu_name
from gptlib.pretrained import load_pretrained
from gptlib.viz.page_weights import page_weights
from tests.support.browser.page_model import model_page
from tests.support.browser.servers import CHROMIUM, CHROMIUM_ARGS

# In the page: each case as a function, run `repeats` times on one session already warm. Changing the first
# character recomputes all T_max positions; changing the last, one; deleting it, none (the Run is copied).
CASES = """async () => {
  const gpt = await import("/gpt.js");
  const bytes = await (await fetch("/w/course.gptw")).arrayBuffer();
  const model = gpt.readWeights(bytes);
  const { T_max, V } = model.config;
  const tokens = Int32Array.from({ length: T_max }, (_, t) => (7 * t + 3) % V);
  const other = (t) => { const changed = tokens.slice(); changed[t] = (changed[t] + 1) % V; return changed; };
  // A session of its own, given each of two texts in turn: every call differs from the one before.
  const alternating = (one, two) => {
    const session = new gpt.Session(model);
    let calls = 0;
    return () => session.run(calls++ % 2 ? one : two);
  };
  window.cases = {
    "read the weights file": () => gpt.readWeights(bytes),
    [`first character changed: ${T_max} positions`]: alternating(tokens, other(0)),
    "last character changed: 1 position": alternating(tokens, other(T_max - 1)),
    "last character deleted: none": alternating(tokens, tokens.subarray(0, T_max - 1)),
  };
  for (const work of Object.values(window.cases)) for (let i = 0; i < 10; i++) work(); // the JIT compiles them
  return Object.keys(window.cases);
}"""

WALL = """([name, repeats]) => {
  const all = [];
  for (let i = 0; i < repeats; i++) {
    const start = performance.now();
    window.cases[name]();
    all.push(performance.now() - start);
  }
  return all.sort((a, b) => a - b);
}"""

REPEAT = """([name, repeats]) => { for (let i = 0; i < repeats; i++) window.cases[name](); }"""


def thread_time(cdp) -> float:
    """CPU seconds the page's main thread has used (the DevTools Protocol's ThreadTime metric)."""
    return next(m["value"] for m in cdp.send("Performance.getMetrics")["metrics"] if m["name"] == "ThreadTime")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=31)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    weights = page_weights(load_pretrained("shakespeare"))
    load_before, rows = os.getloadavg()[0], {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            with model_page(browser) as page:
                page.serve("/w/course.gptw", weights)
                cdp = page.page.context.new_cdp_session(page.page)
                cdp.send("Performance.enable", {"timeDomain": "threadTicks"})
                for name in page.evaluate(CASES):
                    wall = page.evaluate(WALL, [name, args.repeats])
                    before = thread_time(cdp)
                    page.evaluate(REPEAT, [name, args.repeats])
                    cpu = (thread_time(cdp) - before) / args.repeats * 1000
                    rows[name] = (wall[len(wall) // 2], wall[0], cpu)
                version = browser.version
        finally:
            browser.close()
    print(f"gpt.js on the course model ({len(weights):,} bytes of weights), headless Chromium {version}, "
          f"{cpu_name()}, {os.cpu_count()} CPUs, load average {load_before:.1f} before "
          f"and {os.getloadavg()[0]:.1f} after; {args.repeats} runs each, milliseconds:")
    print(f"  {'':<38} {'median':>8} {'fastest':>8} {'CPU mean':>9}")
    for name, (median, fastest, cpu) in rows.items():
        print(f"  {name:<38} {median:8.2f} {fastest:8.2f} {cpu:9.2f}")


if __name__ == "__main__":
    main()
