"""ARCHITECTURE.md's symbol index: every name it cites is importable, every notebook it cites exists."""

import importlib
import re
from pathlib import Path

import pytest

from tests.support.notebook_files import NOTEBOOKS

ROOT = Path(__file__).resolve().parent.parent
TEXT = (ROOT / "ARCHITECTURE.md").read_text()
NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")


def cited_names():
    """`module.name` spans of the index (a call's arguments dropped), as gptlib.<module> and an attribute path."""
    names = set()
    for span in re.findall(r"`([^`]+)`", TEXT[TEXT.index("## Symbol index"):]):
        span = re.sub(r"\(.*\)$", "", span).removeprefix("gptlib.")
        if NAME.fullmatch(span) and not span.endswith((".md", ".py")):
            names.add(span)
    return sorted(names)


def resolve(name):
    parts = name.split(".")
    for split in range(len(parts) - 1, 0, -1):  # the longest prefix that is a module
        try:
            obj = importlib.import_module("gptlib." + ".".join(parts[:split]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[split:]:
            obj = getattr(obj, attribute)
        return obj
    raise ModuleNotFoundError(f"no gptlib module for {name}")


def test_the_index_cites_names_from_every_layer():
    names = cited_names()
    assert len(names) > 40
    examples = {"circuits.W_QK", "counting.theorem_5_2", "model.GPT.embed", "viz.residual.init_variance_figure"}
    assert examples <= set(names)


@pytest.mark.parametrize("name", cited_names())
def test_every_cited_name_is_importable(name):
    if name.startswith("viz."):
        pytest.importorskip("matplotlib")
        pytest.importorskip("ipywidgets")
    assert resolve(name) is not None


def test_every_cited_notebook_exists():
    index = TEXT[TEXT.index("## Symbol index"):]
    rows = [line for line in index.splitlines() if line.startswith("| ")]
    in_table = {n for row in rows for n in re.findall(r"\b0\d\b", row.split("|")[-2])}
    in_figures = set(re.findall(r"\b0\d\b", index[index.index("Figures and widgets"):]))
    cited, numbered = in_table | in_figures, {path.name[:2] for path in NOTEBOOKS}
    assert cited == numbered, f"cited but missing: {sorted(cited - numbered)}, not indexed: {sorted(numbered - cited)}"
