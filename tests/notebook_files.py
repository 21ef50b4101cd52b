"""The lecture's notebooks (notebooks/NN_*.ipynb, in order) and their cells, for the tests that read them."""

from pathlib import Path

import nbformat

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def cells(path: Path) -> list:
    """A notebook's cells, as nbformat 4 reads them."""
    return nbformat.read(path, as_version=4).cells


def code_cells(path: Path) -> list[tuple[int, object]]:
    """(index among all the notebook's cells, cell) of each code cell."""
    return [(i, cell) for i, cell in enumerate(cells(path)) if cell.cell_type == "code"]
