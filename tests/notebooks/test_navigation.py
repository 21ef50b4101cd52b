"""The notebooks read as a book: each says what of the lecture it covers, captions every figure,
ends with what it showed and links to its neighbours; notebook 00 links to every notebook and exercise.

Links to a heading use JupyterLab's anchor for it (its text with spaces replaced by '-', the rule
of JupyterLab's createHeaderId, kept in data-jupyter-id), which book/slugs.py makes the book use too.
"""

import functools
import re

import pytest

from book.slugs import jupyterlab_slug
from tests.support.notebook_files import NOTEBOOKS, cells

LINK = re.compile(r"\]\(([0-9][0-9]_[\w]+\.ipynb)(?:#([^)]*))?\)")


@functools.cache
def headings(path) -> set[str]:
    """The JupyterLab anchors of a notebook's Markdown headings (read once per notebook)."""
    return {
        jupyterlab_slug(line.lstrip("#").strip())
        for cell in cells(path) if cell.cell_type == "markdown"
        for line in cell.source.splitlines() if line.startswith("#")
    }


def shows_a_figure(cell) -> bool:
    return cell.cell_type == "code" and any(
        "image/png" in output.get("data", {}) or "application/vnd.jupyter.widget-view+json" in output.get("data", {})
        for output in cell.outputs
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_opens_with_what_it_covers_and_ends_with_what_you_saw_and_its_neighbours(path):
    nb_cells = cells(path)
    assert nb_cells[0].source.startswith("# ")
    assert nb_cells[1].source.startswith("**In the lecture:**")
    last = nb_cells[-1].source
    assert last.startswith("## What you saw")
    i = NOTEBOOKS.index(path)
    footer = LINK.findall(last.split("---")[-1])
    if i > 0:
        assert footer[0] == (NOTEBOOKS[i - 1].name, "")  # previous
    if i + 1 < len(NOTEBOOKS):
        assert footer[-1] == (NOTEBOOKS[i + 1].name, "")  # next


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_figure_has_a_numbered_caption_right_below(path):
    nb_cells = cells(path)
    captions = [c.source for c in nb_cells if c.cell_type == "markdown" and c.source.startswith("**Figure ")]
    figures = [i for i, c in enumerate(nb_cells) if shows_a_figure(c)]
    number = int(path.name[:2])
    assert captions == [nb_cells[i + 1].source for i in figures]
    assert [caption.split("**")[1] for caption in captions] == [f"Figure {number}.{k}." for k in range(1, len(figures) + 1)]


def test_contents_link_every_notebook_and_every_exercise():
    contents = next(c.source for c in cells(NOTEBOOKS[0]) if c.source.startswith("## Contents"))
    linked = [target for target, _ in LINK.findall(contents)]
    assert sorted(set(linked)) == [p.name for p in NOTEBOOKS]
    exercises = {(p.name, anchor) for p in NOTEBOOKS for anchor in headings(p) if jupyterlab_slug("Your turn") in anchor}
    assert exercises <= set(LINK.findall(contents))


def test_every_link_between_notebooks_reaches_a_heading():
    for path in NOTEBOOKS:
        for cell in cells(path):
            if cell.cell_type == "markdown":
                for target, anchor in LINK.findall(cell.source):
                    assert (path.parent / target).is_file(), f"{path.name} links to a missing {target}"
                    assert not anchor or anchor in headings(path.parent / target), f"{path.name}: {target}#{anchor}"
