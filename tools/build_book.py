"""Build the companion's static book: book/ and the executed notebooks/ as an HTML site.

    python tools/build_book.py [--out build/book]

The sources are staged side by side in OUT/src (copies keep their modification times, so a
rebuild redoes only what changed) and built by Sphinx with warnings as errors into
OUT/html. Notebooks are not re-executed. The weights of the shipped checkpoints go beside the
pages (OUT/html/gptlib-weights, gptlib.viz.page_model), so the explorers run typed text in the
page. Prints the build time, the weights' sizes and where to open the site.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD_TIMEOUT_S = 600  # about 15 s from scratch on a 2-core machine; past this Sphinx has hung


def stage(src: Path) -> None:
    """Copy book/ and notebooks/[0-9]*.ipynb into `src`, dropping anything left from before."""
    if src.exists():
        shutil.rmtree(src)
    shutil.copytree(ROOT / "book", src, ignore=shutil.ignore_patterns("__pycache__"))
    for notebook in sorted((ROOT / "notebooks").glob("[0-9]*.ipynb")):
        shutil.copy2(notebook, src / notebook.name)


def sphinx_build(src: Path, out: Path) -> Path:
    """Build `src` into out/html with warnings as errors; raise CalledProcessError if any."""
    cmd = [
        sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
        "-d", str(out / "doctrees"), str(src), str(out / "html"),
    ]
    subprocess.run(cmd, check=True, timeout=BUILD_TIMEOUT_S)
    return out / "html"


def build(out: Path) -> Path:
    """Stage the book's sources in out/src, build them into out/html and put the shipped weights beside the pages."""
    from gptlib.viz.page_model import WEIGHTS_DIR, write_shipped_weights

    stage(out / "src")
    html = sphinx_build(out / "src", out)
    for name, size in write_shipped_weights(html / WEIGHTS_DIR).items():
        print(f"{WEIGHTS_DIR}/{name}: {size:,} bytes")
    return html


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "book")
    args = parser.parse_args()
    start = time.perf_counter()
    try:
        html = build(args.out.resolve())
    except subprocess.CalledProcessError:
        sys.exit("the book did not build: Sphinx reported the warnings or errors above")
    except subprocess.TimeoutExpired:
        sys.exit(f"the book did not build: Sphinx had not finished after {BUILD_TIMEOUT_S} s")
    print(f"built in {time.perf_counter() - start:.1f} s; open {html / 'index.html'}")


if __name__ == "__main__":
    main()
