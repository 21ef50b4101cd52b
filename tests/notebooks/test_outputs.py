"""The committed notebook outputs follow the README's output rule, so nbval passes on any machine.

nbval compares every output of a cell not tagged nbval-ignore-output. Such an output must not hold
digits at the level of float rounding (they differ between CPUs) nor anything about the machine that
executed it (absolute paths, e.g. in a traceback), and an error shows only its type and message.
An explorer's output (its cell is tagged nbval-ignore-output: its saved numbers are rounding-level) carries the
explorers' JavaScript as it was when the notebook ran, which the book and saved pages run: it must be today's.
"""

import json
import re

import pytest

from tests.support.notebook_files import NOTEBOOKS, code_cells, texts

# a POSIX path of two or more parts that starts at the root, or a Windows drive path
ABSOLUTE_PATH = re.compile(r"(?<![\w.)\]/])/(?:[\w.-]+/)+[\w.-]*|\b[A-Za-z]:\\")
# base64 payloads (an explorer's static copy: its PNG as a data URI, its saved numbers) are bytes, not paths
BASE64 = re.compile(r'base64,[A-Za-z0-9+/=]+|"base64":"[A-Za-z0-9+/=]*"')
# a float printed with a decimal point and an exponent of -5 or below: rounding-level digits
ROUNDING_LEVEL = re.compile(r"\b\d\.\d+e-(?:0[5-9]|[1-9]\d)\b")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_output_holds_an_absolute_path(path):
    found = [(i, match) for i, cell in code_cells(path) for output in cell.outputs
             for text in texts(output) for match in ABSOLUTE_PATH.findall(BASE64.sub("", ANSI.sub("", text)))]
    assert found == [], f"cell index, path: {found}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_compared_outputs_hold_no_rounding_level_digits(path):
    found = [(i, match) for i, cell in code_cells(path)
             if "nbval-ignore-output" not in cell.metadata.get("tags", [])
             for output in cell.outputs for text in texts(output)
             for match in ROUNDING_LEVEL.findall(text)]
    assert found == [], f"cell index, number (show it in a cell tagged nbval-ignore-output): {found}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_errors_show_only_their_type_and_message(path):
    errors = [(i, output) for i, cell in code_cells(path) for output in cell.outputs if output.output_type == "error"]
    for i, error in errors:
        shown = ANSI.sub("", "".join(error.traceback)).strip()
        assert shown == f"{error.ename}: {error.evalue}", f"cell index {i}"


def test_the_scan_finds_what_it_looks_for():
    assert ABSOLUTE_PATH.findall('File "/home/ann/gptlib/model.py", line 3') == ["/home/ann/gptlib/model.py"]
    assert ABSOLUTE_PATH.findall(r"C:\Users\ann") == ["C:\\"]
    assert ABSOLUTE_PATH.findall("1/sqrt(2L), d/H, (T, d)/2, gptlib/checkpoints/induction.pt") == []
    assert ROUNDING_LEVEL.findall("max |difference| = 2.2e-08, ratio 8.9e+04, 4.73e-04, <= 1e-05") == ["2.2e-08"]


SAVED_MODULE = re.compile(r"await showSaved\(host, ")  # gptlib.viz.explorer.Explorer.static_html: the module's text follows


def todays_saved_modules() -> set[str]:
    """The module each explorer's static copy runs, as gptlib/viz/js holds it now."""
    from gptlib.viz.attention import AttentionExplorer
    from gptlib.viz.counting import ParameterCountExplorer
    from gptlib.viz.layernorm import LayerNormSphere
    from gptlib.viz.next_character import NextCharacterExplorer
    from gptlib.viz.page_model import ModelExplorer, model_module
    from gptlib.viz.stream import StreamExplorer

    explorers = (AttentionExplorer, StreamExplorer, NextCharacterExplorer, LayerNormSphere, ParameterCountExplorer)
    return {model_module(e.module_name, gpt_source=False) if issubclass(e, ModelExplorer) else e._esm for e in explorers}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_explorer_output_carries_todays_javascript(path):
    """After a change under gptlib/viz/js, re-run the notebooks whose explorers show it (`make notebooks`)."""
    from gptlib.viz.explorer import FROM_STATE, STATIC_JS

    modules, stale = todays_saved_modules(), []
    for i, cell in code_cells(path):
        for output in cell.outputs:
            html = "".join(output.get("data", {}).get("text/html", ""))
            if 'class="gptlib-from-state"' in html and html != FROM_STATE["text/html"]:
                stale.append((i, "the loader drawing from widget state (js/static.js, js/from_state.js)"))
            if 'class="gptlib-static"' not in html:
                continue
            if STATIC_JS not in html:
                stale.append((i, "the static copies' loader (js/static.js)"))
            module, _ = json.JSONDecoder().raw_decode(html[SAVED_MODULE.search(html).end():])
            if module not in modules:
                stale.append((i, "the explorer's module (js/common.js, js/inpage.js or its own)"))
    assert stale == [], f"cell index, what is out of date: {stale}"
