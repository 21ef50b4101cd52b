"""How `make test` spreads the suite over processes (pytest-xdist, `pytest -n auto`: conftest.py asks
for a worker per core and one more, three on this 2-core machine).

The work goes out in units, each to the next free worker: one unit per test file or notebook, except
for two that keep shared servers to one worker: "lab", the browser tests of JupyterLab and Voila,
which share one JupyterLab server and one Voila server, and "book", the book's build and its browser
tests, which share one built book. (Each starts its own Chromium: a second or two.) Units go
out in collection order, which conftest.py sorts so that the longest come first: the portability
variants (whose nbval processes then run beside everything else), the browser tests, the slow tests,
the notebooks, and then the unit tests, which fill the gaps.
"""

from __future__ import annotations

from xdist.scheduler import LoadScopeScheduling

BOOK_UNIT = ("tests/browser/test_book_in_browser.py", "tests/test_book_build.py")
LAB_UNIT = "tests/browser/"


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to: 'book', 'lab', or its file."""
    path = nodeid.split("::")[0]
    return "book" if path in BOOK_UNIT else "lab" if path.startswith(LAB_UNIT) else path


class ByUnitScheduling(LoadScopeScheduling):
    def __init__(self, config, log=None):
        super().__init__(config, log)
        config.option.loadscopereorder = False  # keep conftest.py's order: longest units first

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid)
