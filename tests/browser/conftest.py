"""Fixtures of the browser tests: a JupyterLab server, a Notebook 7 server, `make app`'s Voila
server, headless Chromium and a fresh page per test. The servers and browser flags themselves live in servers.py.
"""

import os
from pathlib import Path

import pytest

from tests.support.browser.servers import CHROMIUM, CHROMIUM_ARGS, lab_server, offline_context, voila_server


def pytest_collection_modifyitems(config, items):
    """Without Chromium these tests skip on a learner's machine, but fail in CI."""
    if Path(CHROMIUM).exists() or os.environ.get("CI"):
        return
    skip = pytest.mark.skip(reason="Debian's chromium is not installed (make test installs it when run as root)")
    for item in items:
        if "browser" in item.path.parts:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    with lab_server(tmp_path_factory.mktemp("lab")) as server:
        yield server


@pytest.fixture(scope="session")
def notebook7(tmp_path_factory):
    with lab_server(tmp_path_factory.mktemp("notebook7"), app="notebook") as server:
        yield server


@pytest.fixture(scope="session")
def voila_app(tmp_path_factory):
    with voila_server(tmp_path_factory.mktemp("voila")) as url:
        yield url


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def known_page_errors() -> list[str]:
    """Uncaught errors of a front end's own code that a test module accepts, each named and explained
    where it is overridden (none by default)."""
    return []


@pytest.fixture
def page(browser, known_page_errors):
    """A fresh page; any uncaught JavaScript error fails the test (but those in known_page_errors).

    Requests that leave 127.0.0.1 are refused at once (Voila's template asks a CDN for
    icons): offline they would otherwise wait on name resolution and delay the page's load.
    """
    context = offline_context(browser)
    new_page = context.new_page()
    errors: list[str] = []
    new_page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield new_page
    context.close()
    errors = [error for error in errors if not any(known in error for known in known_page_errors)]
    assert not errors, f"JavaScript errors in the page: {errors}"


@pytest.fixture(scope="session")
def course():
    """The shipped course model in float64: the reference the page's float64 arithmetic is held to (float32 torch
    itself differs from it by up to ~1e-6 in A^h: 1.04e-6 on 08's text)."""
    from gptlib import pretrained

    return pretrained.load_pretrained("shakespeare").double()
