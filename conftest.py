"""What every pytest run in this repository needs, whatever paths it is given.

* The kernel watchdog (tests/support/kernel_watchdog.py): a notebook kernel that dies fails its
  cell within seconds instead of nbval waiting out the cell timeout.
* Test kinds as markers, so one kind can be run alone (`pytest -m unit`, the fast inner loop):
  notebooks (nbval over notebooks/), portability (nbval again under simulated other CPUs),
  browser (tests/browser: JupyterLab, Voila and the book in Chromium), slow (tests marked
  `@pytest.mark.slow` in their files: they start processes, build the book or train, seconds each),
  and unit (everything else).
* Order: the longest work first (portability, browser, slow, notebooks, then unit tests), so that
  `make test`'s workers (`pytest -n auto`: a worker per core and one more; tests/support/parallel.py
  says how the work is split) end together.
* The portability variants' nbval runs (minutes each, in processes of their own) all start when the
  first portability test is set up and go on beside the rest of the suite at a lower priority; each
  variant's test waits for its verdict. Runs still going when the session ends are killed.
"""

import os
from pathlib import Path

import pytest

# Waiting OpenMP threads sleep instead of spinning, in this process and every one it starts (kernels,
# servers, training runs): with the suite's workers and background runs sharing two cores, spinning
# threads made torch processes up to ten times slower. It changes no result.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

pytest_plugins = ("tests.support.kernel_watchdog",)

BROWSER = Path(__file__).resolve().parent / "tests" / "browser"


def kind(item) -> str:
    if item.nodeid.split("::")[0].endswith(".ipynb"):
        return "notebooks"
    if item.get_closest_marker("portability"):
        return "portability"
    if BROWSER in Path(str(item.path)).resolve().parents:
        return "browser"
    if item.get_closest_marker("slow"):
        return "slow"
    return "unit"


FIRST_TO_LAST = ("portability", "browser", "slow", "notebooks", "unit")


def pytest_collection_modifyitems(items):
    for item in items:
        item.add_marker(kind(item))
    items.sort(key=lambda item: FIRST_TO_LAST.index(kind(item)))  # stable: each kind keeps its order


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """`pytest -n auto` (make test): a worker per core, and one more that only waits for the
    portability runs."""
    return (os.cpu_count() or 1) + 1


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    from tests.support.parallel import ByUnitScheduling

    return ByUnitScheduling(config, log)


def selected_variants(items) -> set[str]:
    return {item.callspec.params["variant"] for item in items
            if kind(item) == "portability" and "variant" in getattr(getattr(item, "callspec", None), "params", {})}


def pytest_runtest_setup(item):
    if kind(item) == "portability":
        from tests.support.portability import ci_run, ci_variants

        chosen, _ = ci_variants()
        for name in selected_variants(item.session.items) & set(chosen):
            ci_run(name)  # started once; the later calls find it running


def pytest_sessionfinish(session):
    if selected_variants(session.items):
        from tests.support.portability import stop_ci_runs

        stop_ci_runs()
