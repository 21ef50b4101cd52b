"""How `make test` spreads the suite over processes (pytest-xdist, `pytest -n auto`: conftest.py asks
for a worker per core and one more, three on this 2-core machine).

The work goes out in units, each to the next free worker: one unit per test file or notebook, except
that the browser tests and the book build are one unit, since they share one JupyterLab server, one
Voila server, one Chromium and one built book that each worker would otherwise start again. Units go
out in collection order, which conftest.py sorts so that the longest come first: the portability
variants (whose nbval processes then run beside everything else), the browser tests, the slow tests,
the notebooks, and then the unit tests, which fill the gaps.
"""

from __future__ import annotations

from xdist.scheduler import LoadScopeScheduling

SHARED_BROWSER_UNIT = ("tests/browser/", "tests/test_book_build.py")


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to: 'browser', or its file."""
    path = nodeid.split("::")[0]
    return "browser" if path.startswith(SHARED_BROWSER_UNIT) else path


class ByUnitScheduling(LoadScopeScheduling):
    def __init__(self, config, log=None):
        super().__init__(config, log)
        config.option.loadscopereorder = False  # keep conftest.py's order: longest units first

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid)
