"""What every pytest run in this repository needs, whatever paths it is given.

* The kernel watchdog (tests/support/kernel_watchdog.py): a notebook kernel that dies fails its
  cell within seconds instead of nbval waiting out the cell timeout.
* The kernel nbval runs every notebook in (pyproject.toml: --nbval-kernel-name=gptlib-other-cpu):
  this environment's Python with environment variables that make torch, MKL and oneDNN pick other
  float kernels and two threads (tests/jupyter/kernels/gptlib-other-cpu/kernel.json; why and which in
  tests/notebooks/test_portability.py), so the outputs committed from a native run must hold on another CPU.
  Jupyter finds it through JUPYTER_PATH, set here for this process and the ones it starts.
* Test kinds as markers, so one kind can be run alone (`pytest -m unit`, the fast inner loop):
  notebooks (nbval over notebooks/), portability (make portability: nbval natively and under every simulated CPU),
  browser (tests/browser: JupyterLab, Voila and the book in Chromium), slow (tests marked
  `@pytest.mark.slow` in their files: they start processes, build the book, train or sweep 200 hidden
  variants, seconds each),
  and unit (everything else).
* Order, for `make test`'s workers (pytest-xdist, `--dist loadfile`: each file or notebook goes whole
  to one worker, `--no-loadscope-reorder`: in this order): the longest work first (portability,
  browser, slow, notebooks, then the unit tests, which fill the gaps), so that the workers end
  together. Within a kind, a file holding a test that declares a longer timeout than the default
  (`@pytest.mark.timeout(s)`: the wheel's fresh environment) goes first, so that it is not the one left
  running alone at the end. (`--dist loadgroup`, which could keep the browser tests' servers to one worker, ignores
  its groups under pytest 9.2: https://github.com/pytest-dev/pytest-xdist/issues/1386.)
"""

import functools
import os
from pathlib import Path

# Waiting OpenMP threads sleep instead of spinning, in this process and every one it starts (kernels,
# servers, training runs): with the suite's workers sharing two cores, spinning threads made torch
# processes up to ten times slower. It changes no result.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

JUPYTER_DIR = str(Path(__file__).resolve().parent / "tests" / "jupyter")
if JUPYTER_DIR not in os.environ.get("JUPYTER_PATH", "").split(os.pathsep):  # xdist's workers inherit it
    os.environ["JUPYTER_PATH"] = os.pathsep.join(filter(None, (JUPYTER_DIR, os.environ.get("JUPYTER_PATH"))))

pytest_plugins = ("tests.support.kernel_watchdog",)

BROWSER = Path(__file__).resolve().parent / "tests" / "browser"
FIRST_TO_LAST = ("portability", "browser", "slow", "notebooks", "unit")


@functools.cache  # one answer per file, not per test: resolving a path costs system calls
def in_browser_folder(path: Path) -> bool:
    return BROWSER in path.resolve().parents


def kind(item) -> str:
    if item.nodeid.split("::")[0].endswith(".ipynb"):
        return "notebooks"
    if item.get_closest_marker("portability"):
        return "portability"
    if in_browser_folder(item.path):
        return "browser"
    if item.get_closest_marker("slow"):
        return "slow"
    return "unit"


def declared_timeout(item) -> float:
    """The timeout a test declares for itself (seconds), 0 where it takes the default."""
    marker = item.get_closest_marker("timeout")
    return float(marker.args[0]) if marker and marker.args else 0.0


def pytest_collection_modifyitems(items):
    longest: dict[Path, float] = {}
    for item in items:
        item.add_marker(kind(item))
        longest[item.path] = max(longest.get(item.path, 0.0), declared_timeout(item))
    # stable: otherwise each kind keeps its order
    items.sort(key=lambda item: (FIRST_TO_LAST.index(kind(item)), -longest[item.path]))
