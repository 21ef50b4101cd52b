"""How `make test` splits the suite over its workers (tests/support/parallel.py, conftest.py)."""

import pytest

pytest.importorskip("xdist")

from tests.support.parallel import unit_of  # noqa: E402


@pytest.mark.parametrize("nodeid, unit", [
    ("tests/browser/test_voila_app.py::test_every_explorer_redraws_in_the_voila_app", "lab"),
    ("tests/browser/test_saved_explorers.py::test_x[01_multi_head_attention.ipynb-AttentionExplorer(]", "lab"),
    ("tests/browser/test_book_in_browser.py::test_search_finds_a_lecture_term", "book"),
    ("tests/test_book_build.py::test_a_warning_fails_the_build", "book"),  # builds the book they serve
    ("notebooks/05_gpt_and_parameter_count.ipynb::Cell 3", "notebooks/05_gpt_and_parameter_count.ipynb"),
    ("tests/test_model.py::test_x[a::b]", "tests/test_model.py"),
])
def test_browser_tests_share_two_units_and_every_other_file_is_its_own(nodeid, unit):
    assert unit_of(nodeid) == unit

