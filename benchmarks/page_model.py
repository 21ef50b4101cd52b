"""How long gptlib/viz/js/gpt.js takes in headless Chromium on the course model (the shipped Shakespeare GPT).

    python -m benchmarks.page_model [--repeats 31]

Prints the median and the fastest of `repeats` timings (performance.now in the page) of: reading the
weights file (readWeights: parse, check, assemble), a full forward pass at T = T_max in a fresh Session,
one appended position at T = T_max (the session has seen the first T_max - 1 characters), and a
deleted last character (nothing to compute: the Run is copied out). Wall time in a page: on a machine
others are loading, the fastest is the better estimate of the work, the median of what a reader sees.
"""

from __future__ import annotations

import argparse
import platform

from benchmarks.browser.servers import CHROMIUM, CHROMIUM_ARGS
from gptlib.pretrained import load_pretrained
from gptlib.viz.page_weights import page_weights
from tests.support.page_model import model_page

TIMINGS = """async ([repeats]) => {
  const gpt = await import("/gpt.js");
  const bytes = await (await fetch("/w/course.gptw")).arrayBuffer();
  const time = (work, before = () => null) => {
    const all = [];
    for (let r = 0; r < repeats; r++) {
      const state = before();
      const start = performance.now();
      work(state);
      all.push(performance.now() - start);
    }
    all.sort((a, b) => a - b);
    return [all[all.length >> 1], all[0]];
  };
  const model = gpt.readWeights(bytes);
  const { T_max, V } = model.config;
  const tokens = Int32Array.from({ length: T_max }, (_, t) => (7 * t + 3) % V);
  const primed = (T) => () => { const s = new gpt.Session(model); s.run(tokens.subarray(0, T)); return s; };
  for (let r = 0; r < 5; r++) new gpt.Session(model).run(tokens); // the JIT compiles the hot loops
  return {
    "read the weights file": time(() => gpt.readWeights(bytes)),
    [`full forward, T = ${T_max}`]: time((s) => s.run(tokens), () => new gpt.Session(model)),
    [`one appended position, T = ${T_max}`]: time((s) => s.run(tokens), primed(T_max - 1)),
    [`last character deleted, T = ${T_max - 1}`]: time((s) => s.run(tokens.subarray(0, T_max - 1)), primed(T_max)),
  };
}"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=31)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    weights = page_weights(load_pretrained("shakespeare"))
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            with model_page(browser) as page:
                page.serve("/w/course.gptw", weights)
                rows = page.evaluate(TIMINGS, [args.repeats])
                version = browser.version
        finally:
            browser.close()
    print(f"gpt.js on the course model ({len(weights):,} bytes of weights), headless Chromium {version}, "
          f"{platform.processor() or platform.machine()}, median and fastest of {args.repeats}:")
    for what, (median, fastest) in rows.items():
        print(f"  {what:<36} {median:8.2f} ms  {fastest:8.2f} ms")


if __name__ == "__main__":
    main()
