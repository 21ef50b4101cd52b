"""Frame times of the five explorers in a real browser: key press -> the explorer's next frame.

    python -m benchmarks.roundtrip [--moves 10] [--only lab|voila|book] [--docs] [--screenshots DIR]

The explorers draw in the page (gptlib/viz/js), so a move is answered without the kernel. For
every control of every explorer, in JupyterLab (notebooks 01, 04, 05, 08, 10), in Voila (`make app`'s
page) and in the static book (`make book`, no kernel at all), it presses a key MOVES times and
measures, in the page's own clock, from the keydown to the next frame the explorer draws (its
root's data-frames attribute changes in the requestAnimationFrame callback that draws); see
tests/support/browser/jupyterlab_driver.frame_ms. Typed text (the attention, stream and next-character
explorers) is run by the model in the page (gptlib.viz.page_model), once its weights are read:
"text, every length" types one character at a time from a 1-character text to T_max = 64, so its
median and worst cover every length. Also server start -> first explorer usable. It prints one table,
the targets (median <= 17 ms, one frame, worst <= 50 ms), the CPU and the load average before and
after, since other work on the machine inflates every figure; results go to
benchmarks/results/roundtrip.json and, with --docs, into docs/benchmarks.md's table.

This is a benchmark, not a test: nothing here fails on a slow machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image

from tests.support.browser.jupyterlab_driver import frame_ms, live, open_and_run_all, open_notebook, run_cell, saved
from tests.support.browser.servers import CHROMIUM, CHROMIUM_ARGS, free_port, lab_server, offline_context, serve, voila_server

ROOT = Path(__file__).resolve().parents[1]

TARGET_MEDIAN_MS, TARGET_WORST_MS = 17, 50  # one frame at 60 Hz; worst
T_MAX = 64  # the course model's: "text, every length" grows the text from 1 character to this
SCREENSHOT_WIDTH = 720  # px
EXPLORERS = {  # name: (notebook, CSS class of the explorer); in JupyterLab all cells run, or ONLY_CELL's
    "attention": ("01_multi_head_attention", "gptlib-attn-explorer"),
    "sphere": ("04_layernorm_geometry", "gptlib-sphere"),
    "count": ("05_gpt_and_parameter_count", "gptlib-count"),
    "stream": ("10_reading_the_residual_stream", "gptlib-stream-explorer"),
    "next": ("08_trained_model_tour", "gptlib-next-explorer"),
}
ONLY_CELL = {"stream": "StreamExplorer(pretrained.load_pretrained"}  # a cell that needs no earlier one
TABLE_START, TABLE_END = "<!-- roundtrip table: python -m benchmarks.roundtrip --docs -->", "<!-- end of roundtrip table -->"


def slider(css: str, steps: int = 3, first: str = "ArrowRight"):
    """Arrow keys on a range input: `steps` towards `first` (a slider at its maximum: "ArrowLeft"), then back, and so on."""
    keys = (first, "ArrowLeft" if first == "ArrowRight" else "ArrowRight")
    def move(explorer, i):
        handle = explorer.locator(f".{css} input[type=range]")
        return lambda: handle.press(keys[(i // steps) % 2])
    return move


def typed_character(css: str):
    """One character typed at the end of the text, then removed again with Backspace."""
    def move(explorer, i):
        box = explorer.locator(f".{css}")
        if i == 0:
            box.focus()
            box.press("Control+End")
        return lambda: box.press("a" if i % 2 == 0 else "Backspace")
    return move


def every_length(css: str):
    """The text cut to its first character, then one character typed at its end at every move, up to T_MAX."""
    def move(explorer, i):
        box = explorer.locator(f".{css}")
        if i == 0:
            box.fill(box.input_value()[:1] or "R")
            box.focus()
            box.press("Control+End")
        return lambda: box.press("abcdefghij"[i % 10])
    move.moves = T_MAX - 1
    return move


def typed_box(css: str, values: tuple[str, str]):
    """A number typed into a text box, sent with Enter, alternating between two values."""
    def move(explorer, i):
        box = explorer.locator(f".{css} input[type=text]")
        box.fill(values[(i + 1) % 2])
        return lambda: box.press("Enter")
    return move


def radio(css: str, count: int):
    """Arrow keys on the checked radio of a group of `count`: to the last one, back to the first, and so on."""
    def move(explorer, i):
        if i == 0:
            explorer.locator(f".{css} input[type=radio]").first.check()
        checked = explorer.locator(f".{css} input:checked")
        checked.focus()
        return lambda: checked.press("ArrowRight" if (i // (count - 1)) % 2 == 0 else "ArrowLeft")
    return move


def button(css: str, labels: tuple[str, str]):
    """Enter on one of two buttons in turn."""
    def move(explorer, i):
        target = explorer.locator(f".{css} button", has_text=labels[(i + 1) % 2]).first
        target.focus()
        return lambda: target.press("Enter")
    return move


def toggle(css: str, labels: tuple[str, ...] = ()):
    """Space on a checkbox, or on one of two buttons in turn; timed from the key's release, when
    the browser activates them (see frame_ms)."""
    def move(explorer, i):
        target = explorer.locator(f".{css} button", has_text=labels[(i + 1) % 2]) if labels else \
            explorer.locator(f".{css} input")
        target.first.focus()
        return lambda: target.first.press("Space")
    move.start_on = "keyup"
    return move


CONTROLS = {
    "attention": {"layer": slider("gptlib-attn-layer"), "head": slider("gptlib-attn-head"),
                  "text": typed_character("gptlib-attn-text"), "text, every length": every_length("gptlib-attn-text")},
    "sphere": {"u_1": slider("gptlib-sphere-u0"), "u_1 typed": typed_box("gptlib-sphere-u0", ("0.5", "1.25")),
               "scale c": slider("gptlib-sphere-scale"), "epsilon": slider("gptlib-sphere-eps", steps=5),
               "gamma": slider("gptlib-sphere-gamma"), "beta": slider("gptlib-sphere-beta"),
               "tilt": slider("gptlib-sphere-tilt"), "turn": slider("gptlib-sphere-turn"),
               "view preset": toggle("gptlib-sphere-view", ("down the all-ones axis", "side-on to the plane"))},
    "count": {"V": typed_box("gptlib-count-V", ("65", "66")), "T_max": typed_box("gptlib-count-Tmax", ("64", "65")),
              "d": typed_box("gptlib-count-d", ("128", "132")), "H": typed_box("gptlib-count-H", ("4", "2")),
              "L": typed_box("gptlib-count-L", ("4", "5")), "tie": toggle("gptlib-count-tie")},
    "stream": {"position": slider("gptlib-stream-position"), "token": radio("gptlib-stream-mode", 3),
               "head": button("gptlib-stream-heads", ("L1H2", "L2H1")),
               "text": typed_character("gptlib-stream-text"), "text, every length": every_length("gptlib-stream-text")},
    "next": {"temperature": slider("gptlib-next-temperature"), "top-k": slider("gptlib-next-top-k", first="ArrowLeft"),
             "text": typed_character("gptlib-next-text"), "text, every length": every_length("gptlib-next-text")},
}
PAGE_MODEL = {"attention", "stream", "next"}  # their texts are run by the model in the page once it is read


def measure_explorer(page, name: str, moves: int, with_kernel: bool, screenshots: Path | None,
                     prefix: str = "") -> dict[str, list[float]]:
    """Frame times in ms for every control of one explorer already on the page (its static copy without a kernel);
    a screenshot of it afterwards as screenshots/<prefix><name>.png."""
    explorer = (live if with_kernel else saved)(page, EXPLORERS[name][1])
    explorer.scroll_into_view_if_needed()
    if name in PAGE_MODEL:
        page.wait_for_function("(root) => root.dataset.pageModel === 'ready'", arg=explorer.element_handle(), timeout=60_000)
    times = {}
    for control, make_move in CONTROLS[name].items():
        start_on = getattr(make_move, "start_on", "keydown")
        times[control] = [frame_ms(explorer, make_move(explorer, i), start_on=start_on)
                          for i in range(getattr(make_move, "moves", moves))]
        print(f"  {name:9} {control:22} median {statistics.median(times[control]):6.1f} ms", flush=True)
    if screenshots is not None:
        screenshots.mkdir(parents=True, exist_ok=True)
        path = screenshots / f"{prefix}{name}.png"
        explorer.screenshot(path=str(path), scale="css")
        shot = Image.open(path)
        shot.thumbnail((SCREENSHOT_WIDTH, SCREENSHOT_WIDTH))  # small enough for a README
        shot.convert("P", palette=Image.Palette.ADAPTIVE, colors=256).save(path, optimize=True)
    return times


def in_lab(browser, moves: int, screenshots: Path | None) -> tuple[dict, float]:
    """Each explorer notebook run in JupyterLab; returns the frame times and server start -> usable (s)."""
    results, startup = {}, None
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        with lab_server(Path(tmp)) as lab:
            context = offline_context(browser)
            page = context.new_page()
            for name, (notebook, css) in EXPLORERS.items():
                if name in ONLY_CELL:
                    open_notebook(page, lab, f"{notebook}.ipynb")
                    run_cell(page, f"{notebook}.ipynb", ONLY_CELL[name])
                else:
                    open_and_run_all(page, lab, f"{notebook}.ipynb")
                live(page, css).wait_for(timeout=120_000)
                if startup is None:
                    startup = time.perf_counter() - start
                results[name] = measure_explorer(page, name, moves, True, screenshots)
            context.close()
    return results, startup


def in_voila(browser, moves: int, screenshots: Path | None) -> tuple[dict, float]:
    """The `make app` page in Voila; returns the frame times and server start -> all explorers drawn (s)."""
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        with voila_server(Path(tmp)) as url:
            context = offline_context(browser)
            page = context.new_page()
            page.goto(url, timeout=180_000)
            for _, css in EXPLORERS.values():
                live(page, css).wait_for(timeout=180_000)
            startup = time.perf_counter() - start
            results = {name: measure_explorer(page, name, moves, True, screenshots, "voila-") for name in EXPLORERS}
            context.close()
    return results, startup


def in_book(browser, moves: int, screenshots: Path | None) -> tuple[dict, float]:
    """The static book's pages (built into a temporary folder, served by a plain file server):
    the explorers run on their saved values, with no kernel. Returns the frame times and server
    start -> first explorer usable (s)."""
    from tools.build_book import build

    results, startup = {}, None
    with tempfile.TemporaryDirectory() as tmp:
        html = build(Path(tmp) / "book")
        port = free_port()
        base = f"http://127.0.0.1:{port}/"
        cmd = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(html)]
        start = time.perf_counter()
        with serve(cmd, base, Path(tmp) / "server.log"):
            context = offline_context(browser)
            page = context.new_page()
            for name, (notebook, css) in EXPLORERS.items():
                page.goto(f"{base}{notebook}.html")
                saved(page, css).wait_for(timeout=60_000)
                if startup is None:
                    startup = time.perf_counter() - start
                results[name] = measure_explorer(page, name, moves, False, screenshots, "book-")
            context.close()
    return results, startup


def cpu_name() -> str:
    """The CPU's model name (Linux), else what platform knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def missed(times: list[list[float] | None]) -> bool:
    """Whether a control misses its target anywhere."""
    measured = [t for t in times if t]
    return any(statistics.median(t) > TARGET_MEDIAN_MS or max(t) > TARGET_WORST_MS for t in measured)


def table(runs: dict[str, tuple[dict, float]]) -> str:
    """Median and worst per explorer and control, one column pair per environment."""
    envs = list(runs)
    header = f"{'explorer':10} {'control':22}" + "".join(f" {env + ' median':>13} {env + ' worst':>12}" for env in envs)
    lines = [header, "-" * len(header)]
    for name, controls in CONTROLS.items():
        for control in controls:
            row = f"{name:10} {control:22}"
            for env in envs:
                times = runs[env][0][name].get(control)
                row += f" {statistics.median(times):10.0f} ms {max(times):9.0f} ms" if times else f" {'-':>13} {'-':>12}"
            lines.append(row + ("  missed" if missed([runs[env][0][name].get(control) for env in envs]) else ""))
    lines.append("-" * len(header))
    lines.append(f"{'start -> first explorer usable':33}" + "".join(f" {runs[env][1]:24.1f} s" for env in envs))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--moves", type=int, default=10, help="key presses per control (default 10)")
    parser.add_argument("--only", choices=("lab", "voila", "book"), help="measure one environment only")
    parser.add_argument("--docs", action="store_true", help="write the table into docs/benchmarks.md")
    parser.add_argument("--screenshots", type=Path, help="write one PNG of each explorer here (<name>.png from "
                        "JupyterLab, voila-<name>.png, book-<name>.png)")
    args = parser.parse_args()
    if not Path(CHROMIUM).exists():
        sys.exit(f"no Chromium at {CHROMIUM}: install Debian's chromium (make test does when run as root)")
    from playwright.sync_api import sync_playwright

    load_before = os.getloadavg()
    runs = {}
    environments = {"lab": lambda b: in_lab(b, args.moves, args.screenshots),
                    "voila": lambda b: in_voila(b, args.moves, args.screenshots),
                    "book": lambda b: in_book(b, args.moves, args.screenshots)}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        for env, measure in environments.items():
            if args.only in (None, env):
                print(f"{env}:", flush=True)
                runs[env] = measure(browser)
        browser.close()
    load_after = os.getloadavg()
    cpu = f"{cpu_name()}, {os.cpu_count()} CPUs"
    load = (f"load average (1, 5, 15 min) before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
            f"after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")
    report = (f"Key press -> the explorer's next frame, {args.moves} moves per control, on {cpu}; {load}\n"
              f"(targets: median <= {TARGET_MEDIAN_MS} ms, worst <= {TARGET_WORST_MS} ms)\n\n{table(runs)}")
    print("\n" + report)
    out = ROOT / "benchmarks" / "results" / "roundtrip.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"moves": args.moves, "cpu": cpu, "load_before": load_before, "load_after": load_after,
                               "runs": {env: {"frame_ms": r, "startup_s": s} for env, (r, s) in runs.items()}},
                              indent=1))
    print(f"raw times: {out.relative_to(ROOT)}")
    if args.docs:
        page = ROOT / "docs" / "benchmarks.md"
        block = f"{TABLE_START}\n```\n{report}\n```\n{TABLE_END}"
        text = page.read_text()
        if TABLE_START not in text:
            sys.exit(f"docs/benchmarks.md has no {TABLE_START!r} line to replace")
        page.write_text(re.sub(re.escape(TABLE_START) + ".*?" + re.escape(TABLE_END), lambda _: block, text, flags=re.S))
        print("docs/benchmarks.md's table rewritten")


if __name__ == "__main__":
    main()
