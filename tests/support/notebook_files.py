"""The lecture's notebooks (notebooks/NN_*.ipynb, in order), their cells and output texts, for the tests that read them."""

from pathlib import Path

import nbformat

from gptlib.__main__ import shipped_notebooks

NOTEBOOKS = shipped_notebooks()  # in a clone, the repository's notebooks/


def notebook(number: str) -> Path:
    """The notebook numbered `number` ("00", "01", ...)."""
    found = [path for path in NOTEBOOKS if path.name.startswith(f"{number}_")]
    if not found:
        raise LookupError(f"no notebook notebooks/{number}_*.ipynb")
    return found[0]


def cells(path: Path) -> list:
    """A notebook's cells, as nbformat 4 reads them."""
    return nbformat.read(path, as_version=4).cells


def code_cells(path: Path) -> list[tuple[int, object]]:
    """(index among all the notebook's cells, cell) of each code cell."""
    return [(i, cell) for i, cell in enumerate(cells(path)) if cell.cell_type == "code"]


def texts(output) -> list[str]:
    """Every piece of text in one output, tracebacks included (images are skipped)."""
    if output.output_type == "stream":
        return [output.text]
    if output.output_type == "error":
        return [output.ename, output.evalue, *output.traceback]
    return [value if isinstance(value, str) else "".join(value)
            for mime, value in output.get("data", {}).items() if mime.startswith("text/")]
