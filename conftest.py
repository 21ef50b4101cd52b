"""What every pytest run in this repository needs, whatever paths it is given.

* The kernel watchdog (tests/support/kernel_watchdog.py): a notebook kernel that dies fails its
  cell within seconds instead of nbval waiting out the cell timeout.
* Test kinds as markers, so one kind can be run alone (`pytest -m unit`, the fast inner loop):
  notebooks (nbval over notebooks/), portability (nbval again under simulated other CPUs),
  browser (tests/browser: JupyterLab, Voila and the book in Chromium), slow (tests marked
  `@pytest.mark.slow` in their files: they start processes, build the book or train, seconds each),
  and unit (everything else).
* The portability variants' nbval runs (minutes each, in processes of their own) start as soon as
  the suite is collected and go on beside the rest of it, which mostly keeps one core busy; their
  tests run last and wait for the verdicts. Runs still going when the session ends are killed.
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
    if item.get_closest_marker("slow"):
        return "slow"
    return "unit"


def pytest_collection_modifyitems(items):
    for item in items:
        item.add_marker(kind(item))
    items.sort(key=lambda item: kind(item) == "portability")  # stable: the rest keep their order


def selected_variants(items) -> set[str]:
    return {item.callspec.params["variant"] for item in items
            if kind(item) == "portability" and "variant" in getattr(getattr(item, "callspec", None), "params", {})}


def pytest_collection_finish(session):
    if selected_variants(session.items):
        from tests.support.portability import ci_run, ci_variants

        chosen, _ = ci_variants()
        for name in selected_variants(session.items) & set(chosen):
            ci_run(name)


def pytest_sessionfinish(session):
    if selected_variants(session.items):
        from tests.support.portability import stop_ci_runs

        stop_ci_runs()
