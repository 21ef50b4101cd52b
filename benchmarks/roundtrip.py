"""Round trips of the three explorers in a real browser: key press -> new picture on screen.

    python -m benchmarks.roundtrip [--moves 10] [--only lab|voila] [--screenshots DIR]

For every control of every explorer, in JupyterLab (the explorer notebooks 01, 04, 05) and
in Voila (`make app`'s page), it presses a key MOVES times and measures, in the page's own
clock, from the keydown to the `load` of the next picture (decoded, ready to paint); see
tests/browser/jupyterlab_driver.round_trip_ms. It also times server start -> first explorer
usable (JupyterLab: launch, open notebook 01, run all its cells, first picture; Voila: launch
to all three explorers drawn). It prints one table, the targets (median <= 200 ms, worst <= 400 ms) and the load
average before and after, since other work on the machine inflates every figure; results
go to benchmarks/results/roundtrip.json. --screenshots writes one small PNG of each explorer
after its moves (the README's pictures).

This is a benchmark, not a test: nothing here fails on a slow machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "browser"))

from jupyterlab_driver import open_and_run_all, picture, round_trip_ms  # noqa: E402
from servers import CHROMIUM, CHROMIUM_ARGS, lab_server, offline_context, voila_server  # noqa: E402

TARGET_MEDIAN_MS, TARGET_WORST_MS = 200, 400
SCREENSHOT_WIDTH = 720  # px
EXPLORERS = {  # name: (notebook in JupyterLab, CSS class of the widget, CSS class of its picture)
    "attention": ("01_multi_head_attention.ipynb", "gptlib-attn-explorer", "gptlib-attn-output"),
    "sphere": ("04_layernorm_geometry.ipynb", "gptlib-sphere", "gptlib-sphere-output"),
    "count": ("05_gpt_and_parameter_count.ipynb", "gptlib-count", "gptlib-count-output"),
}


def slider(css: str, steps: int = 3):
    """Arrow keys on a slider's handle: `steps` to the right, then back, and so on."""
    def move(explorer, i):
        handle = explorer.locator(f".{css} .noUi-handle").first
        handle.focus()
        return lambda: handle.press("ArrowRight" if (i // steps) % 2 == 0 else "ArrowLeft")
    return move


def typed_character(css: str):
    """One character typed at the end of a text area, then removed again with Backspace."""
    def move(explorer, i):
        box = explorer.locator(f".{css} textarea").first
        if i == 0:
            box.focus()
            box.press("Control+End")
        return lambda: box.press("a" if i % 2 == 0 else "Backspace")
    return move


def size_box(css: str, values: tuple[str, str]):
    """A number typed into a text box, sent with Enter, alternating between two values."""
    def move(explorer, i):
        box = explorer.locator(f".{css} input").first
        box.fill(values[(i + 1) % 2])
        return lambda: box.press("Enter")
    return move


def toggle(css: str, labels: tuple[str, ...] = ()):
    """Space on a checkbox, or on one of two toggle buttons in turn."""
    def move(explorer, i):
        target = explorer.locator(f".{css} button", has_text=labels[(i + 1) % 2]) if labels else \
            explorer.locator(f".{css} input")
        target.first.focus()
        return lambda: target.first.press("Space")
    return move


CONTROLS = {
    "attention": {"layer": slider("gptlib-attn-layer"), "head": slider("gptlib-attn-head"),
                  "text (one character)": typed_character("gptlib-attn-text")},
    "sphere": {"u_1": slider("gptlib-sphere-u0"), "scale c": slider("gptlib-sphere-scale"),
               "epsilon": slider("gptlib-sphere-eps", steps=5), "gamma": slider("gptlib-sphere-gamma"),
               "beta": slider("gptlib-sphere-beta"), "tilt": slider("gptlib-sphere-tilt"),
               "turn": slider("gptlib-sphere-turn"),
               "view preset": toggle("gptlib-sphere-view", ("down the all-ones axis", "side-on to the plane"))},
    "count": {"V": size_box("gptlib-count-V", ("65", "66")), "T_max": size_box("gptlib-count-Tmax", ("64", "65")),
              "d": size_box("gptlib-count-d", ("128", "132")), "H": size_box("gptlib-count-H", ("4", "2")),
              "L": size_box("gptlib-count-L", ("4", "5")), "tie": toggle("gptlib-count-tie")},
}


def measure_explorer(page, name: str, moves: int, screenshots: Path | None) -> dict[str, list[float]]:
    """Round trips in ms for every control of one explorer already on the page."""
    _, widget, output = EXPLORERS[name]
    explorer = page.locator(f".{widget}").first
    explorer.scroll_into_view_if_needed()
    times = {}
    for control, make_move in CONTROLS[name].items():
        times[control] = [round_trip_ms(page, output, make_move(explorer, i)) for i in range(moves)]
        print(f"  {name:9} {control:22} median {statistics.median(times[control]):6.0f} ms", flush=True)
    if screenshots is not None:
        screenshots.mkdir(parents=True, exist_ok=True)
        path = screenshots / f"{name}.png"
        page.set_viewport_size({"width": 1400, "height": 2000})  # the whole explorer in view
        explorer.scroll_into_view_if_needed()
        explorer.screenshot(path=str(path), scale="css")
        page.set_viewport_size({"width": 1400, "height": 1000})
        shot = Image.open(path)
        shot.thumbnail((SCREENSHOT_WIDTH, SCREENSHOT_WIDTH))  # small enough for a README
        shot.convert("P", palette=Image.Palette.ADAPTIVE, colors=256).save(path, optimize=True)
    return times


def in_lab(browser, moves: int, screenshots: Path | None) -> tuple[dict, float]:
    """Each explorer notebook run in JupyterLab; returns the round trips and server start -> usable (s)."""
    results, startup = {}, None
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        with lab_server(Path(tmp)) as lab:
            context = offline_context(browser)
            page = context.new_page()
            for name, (notebook, _, output) in EXPLORERS.items():
                open_and_run_all(page, lab, notebook)
                page.locator(picture(output)).first.wait_for()
                if startup is None:
                    startup = time.perf_counter() - start
                results[name] = measure_explorer(page, name, moves, screenshots)
            context.close()
    return results, startup


def in_voila(browser, moves: int) -> tuple[dict, float]:
    """The `make app` page in Voila; returns the round trips and server start -> all explorers drawn (s)."""
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        with voila_server(Path(tmp)) as url:
            context = offline_context(browser)
            page = context.new_page()
            page.goto(url, timeout=180_000)
            for _, _, output in EXPLORERS.values():
                page.locator(picture(output)).first.wait_for(timeout=180_000)
            startup = time.perf_counter() - start
            results = {name: measure_explorer(page, name, moves, None) for name in EXPLORERS}
            context.close()
    return results, startup


def table(runs: dict[str, tuple[dict, float]]) -> str:
    """Median and worst per explorer and control, one column pair per environment."""
    envs = list(runs)
    header = f"{'explorer':10} {'control':22}" + "".join(f" {env + ' median':>15} {env + ' worst':>14}" for env in envs)
    lines = [header, "-" * len(header)]
    for name, controls in CONTROLS.items():
        for control in controls:
            row = f"{name:10} {control:22}"
            for env in envs:
                times = runs[env][0][name][control]
                row += f" {statistics.median(times):12.0f} ms {max(times):11.0f} ms"
            lines.append(row)
    lines.append("-" * len(header))
    lines.append(f"{'server start -> first explorer usable':33}" +
                 "".join(f" {runs[env][1]:26.1f} s" for env in envs))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--moves", type=int, default=10, help="key presses per control (default 10)")
    parser.add_argument("--only", choices=("lab", "voila"), help="measure one environment only")
    parser.add_argument("--screenshots", type=Path, help="write one PNG of each explorer (JupyterLab) here")
    args = parser.parse_args()
    if not Path(CHROMIUM).exists():
        sys.exit(f"no Chromium at {CHROMIUM}: install Debian's chromium (make test does when run as root)")
    from playwright.sync_api import sync_playwright

    load_before = os.getloadavg()
    runs = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        if args.only != "voila":
            print("JupyterLab (notebooks 01, 04, 05):", flush=True)
            runs["lab"] = in_lab(browser, args.moves, args.screenshots)
        if args.only != "lab":
            print("Voila (make app):", flush=True)
            runs["voila"] = in_voila(browser, args.moves)
        browser.close()
    load_after = os.getloadavg()
    print(f"\nRound trip key press -> new picture, {args.moves} moves per control "
          f"(targets: median <= {TARGET_MEDIAN_MS} ms, worst <= {TARGET_WORST_MS} ms)\n")
    print(table(runs))
    print(f"\nload average (1, 5, 15 min) before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
          f"after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f} on {os.cpu_count()} CPUs: "
          "other work on the machine inflates every time above")
    out = ROOT / "benchmarks" / "results" / "roundtrip.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"moves": args.moves, "load_before": load_before, "load_after": load_after,
                               "runs": {env: {"round_trips_ms": r, "startup_s": s} for env, (r, s) in runs.items()}},
                              indent=1))
    print(f"raw times: {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
