"""Every ```python block of docs/*.md, and of a notebook's Markdown, runs as printed (issue 54, item 3).

Each block runs alone in a fresh interpreter, with a timeout. The only names it may take from outside itself
are those the prose around it says the reader brings: `my_gpt` (the reader's own GPT, bound here to gptlib's
course model) and the build track's classes and init_weights (bound to the reference solutions of notebook 09).
Anything else the block uses it must import or define itself, as a reader pasting it would need.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.M | re.S)
# what the prose says the reader brings, bound as a reader who did the work would have it
BROUGHT = """\
import gptlib
from gptlib.exercises.answers.build import GPT, MLP, AttentionHead, Block, LayerNorm, init_weights
from gptlib.exercises.answers.build import MultiHeadAttention as MHA
my_gpt = gptlib.GPT(gptlib.COURSE_CONFIG).eval()
del gptlib
"""
TIMEOUT_S = 300  # the slowest block (the build track's checkers) takes well under a minute alone


def blocks() -> list[tuple[str, str]]:
    """(where, code) of every ```python block in docs/*.md and in the notebooks' Markdown cells."""
    found = []
    for path in sorted((ROOT / "docs").glob("*.md")):
        found += [(f"{path.name} block {i}", code) for i, code in enumerate(BLOCK.findall(path.read_text()))]
    for path in sorted((ROOT / "notebooks").glob("[0-9]*.ipynb")):
        for n, cell in enumerate(json.loads(path.read_text())["cells"]):
            if cell["cell_type"] == "markdown":
                found += [(f"{path.name} cell {n} block {i}", code)
                          for i, code in enumerate(BLOCK.findall("".join(cell["source"])))]
    return found


def run(code: str) -> subprocess.CompletedProcess:
    """The block after BROUGHT, in a fresh interpreter that imports gptlib from this checkout."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", BROUGHT + code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=TIMEOUT_S)


def test_the_docs_hold_python_blocks():
    assert len(blocks()) >= 3


@pytest.mark.slow  # fresh interpreters
@pytest.mark.parametrize("where, code", blocks(), ids=[where for where, _ in blocks()])
def test_each_python_block_runs_as_printed(where, code):
    done = run(code)
    assert done.returncode == 0, f"{where} fails as printed:\n{done.stderr[-2000:]}"


@pytest.mark.slow  # fresh interpreters
def test_a_block_using_a_name_it_never_imports_fails():
    assert run("exercises.progress()\n").returncode != 0
    assert run("from gptlib import exercises\nexercises.progress()\n").returncode == 0
