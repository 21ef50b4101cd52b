"""What every pytest run in this repository needs, whatever paths it is given.

* The kernel watchdog (tests/support/kernel_watchdog.py): a notebook kernel that dies fails its
  cell within seconds instead of nbval waiting out the cell timeout.
* Test kinds as markers, so one kind can be run alone (`pytest -m unit`, the fast inner loop):
  notebooks (nbval over notebooks/), portability (nbval again under simulated other CPUs),
  browser (tests/browser: JupyterLab, Voila and the book in Chromium), and unit (everything else).
"""

from pathlib import Path

pytest_plugins = ("tests.support.kernel_watchdog",)

BROWSER = Path(__file__).resolve().parent / "tests" / "browser"


def kind(item) -> str:
    if item.nodeid.split("::")[0].endswith(".ipynb"):
        return "notebooks"
    if item.get_closest_marker("portability"):
        return "portability"
    if BROWSER in Path(str(item.path)).resolve().parents:
        return "browser"
    return "unit"


def pytest_collection_modifyitems(items):
    for item in items:
        item.add_marker(kind(item))
