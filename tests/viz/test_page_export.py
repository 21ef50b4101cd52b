"""gptlib.viz.page_export and `python -m gptlib html`: a notebook as one HTML file holding its explorers' model, and
what it refuses. tests/browser/test_page_export_in_browser.py types into such a file in Chromium."""

import base64
import json
import re
import shutil

import pytest

from gptlib import __main__ as command
from gptlib.viz.page_export import export
from gptlib.viz.page_model import GPT_SOURCE, saved_weights_keys, shipped_weights
from tests.support.notebook_files import NOTEBOOKS

pytestmark = pytest.mark.slow  # nbconvert renders whole notebooks: seconds each

ATTENTION = next(path for path in NOTEBOOKS if path.name.startswith("01_"))
SPHERE = next(path for path in NOTEBOOKS if path.name.startswith("04_"))  # its explorer runs no model
EMBEDDED_WEIGHTS = re.compile(r'\(globalThis\.gptlibWeights \?\?= \{\}\)\["([0-9a-f]{16})"\] = "([A-Za-z0-9+/=]*)";')


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("export") / "01.html"
    written, keys = export(ATTENTION, out)
    return written, keys, written.read_text()


def test_the_page_holds_gpt_js_and_exactly_the_weights_its_explorers_name(exported):
    written, keys, html = exported
    head = html.split("</head>")[0]
    assert keys == saved_weights_keys(html) and keys and set(keys) <= set(shipped_weights())
    embedded = dict(EMBEDDED_WEIGHTS.findall(head))
    assert set(embedded) == set(keys)
    assert all(base64.b64decode(embedded[key]) == shipped_weights()[key] for key in keys)
    source = re.search(r"globalThis\.gptlibGptSource = (\".*?\");\n", head).group(1)
    assert json.loads(source) == GPT_SOURCE
    assert "</script>" not in source  # the text cannot end its script early


def test_a_notebook_whose_explorers_run_no_model_gets_nothing_embedded(tmp_path):
    written, keys = export(SPHERE, tmp_path / "04.html")
    assert keys == [] and "gptlibWeights" not in written.read_text() and "gptlibGptSource =" not in written.read_text()


def test_bad_notebooks_and_destinations_are_refused_before_anything_is_written(tmp_path):
    with pytest.raises(ValueError, match="is not a file"):
        export(tmp_path / "missing.ipynb", tmp_path / "a.html")
    broken = tmp_path / "broken.ipynb"
    broken.write_text('{"cells": [')
    with pytest.raises(ValueError, match="is not a notebook nbformat can read"):
        export(broken, tmp_path / "b.html")
    with pytest.raises(ValueError, match="is not a folder: nothing was written"):
        export(ATTENTION, tmp_path / "no such folder" / "a.html")
    kept = tmp_path / "kept.html"
    kept.write_text("mine")
    with pytest.raises(ValueError, match="exists: nothing was written"):
        export(ATTENTION, kept)
    assert kept.read_text() == "mine"
    copy = tmp_path / "01.ipynb"
    shutil.copy(ATTENTION, copy)
    with pytest.raises(ValueError, match="is the notebook itself"):
        export(copy, copy, overwrite=True)
    (key,) = saved_weights_keys(copy.read_text().replace("\\\"", '"'))
    other = tmp_path / "other_version.ipynb"
    other.write_text(copy.read_text().replace(key, "0123456789abcdef"))
    with pytest.raises(ValueError, match="0123456789abcdef, which this gptlib does not ship"):
        export(other, tmp_path / "c.html")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["01.ipynb", "broken.ipynb", "kept.html", "other_version.ipynb"]


def test_the_command_refuses_in_one_line_and_replaces_a_page_only_when_told(tmp_path, capsys):
    out = tmp_path / "page.html"
    out.write_text("an older page")
    with pytest.raises(SystemExit, match=r"^error: .*page\.html exists: nothing was written"):
        command.main(["html", str(ATTENTION), str(out)])
    assert out.read_text() == "an older page"
    assert command.main(["html", str(ATTENTION), str(out), "--overwrite"]) == 0
    assert f"{out}: {out.stat().st_size:,} bytes, the weights" in capsys.readouterr().out
    assert saved_weights_keys(out.read_text())
