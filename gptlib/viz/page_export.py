"""A notebook as one HTML file whose explorers run typed text with no kernel and no file beside them.

    python -m gptlib html NOTEBOOK.ipynb [OUT.html] [--overwrite]

nbconvert's HTML of a notebook shows each explorer's static copy (gptlib/viz/explorer.py). A copy of an
explorer of a shipped checkpoint names its weights by key, and in the book reads them, with gpt.js's text,
from the files the book ships beside its pages (gptlib.viz.page_model). Here they go into the page's head
instead (base64 in a classic script, about 4.4 MB for the course model), so the one file runs the model
wherever it is opened: from the file system, mailed, the network blocked. A copy of any other model keeps
the text it was saved with (typing into it needs a kernel), as in the book.
"""

from __future__ import annotations

from pathlib import Path

from .page_model import gpt_source_script, saved_weights_keys, shipped_weights, weights_script


def embedded_model(keys: list[str]) -> str:
    """The <script> that gives a page gpt.js's text and the shipped weights `keys` (inpage.js reads both)."""
    weights = "".join(weights_script(key, shipped_weights()[key]) for key in keys)
    return "<script>\n" + gpt_source_script() + weights + "</script>\n"


def single_file_html(notebook: Path) -> tuple[str, list[str]]:
    """(the HTML of `notebook` with its explorers' model in it, the keys of the weights embedded); a ValueError
    naming the rule where `notebook` is no notebook file, or names weights this gptlib does not ship."""
    import nbformat
    from nbconvert import HTMLExporter

    notebook = Path(notebook)
    if not notebook.is_file():
        raise ValueError(f"{notebook} is not a file: name a notebook (.ipynb)")
    try:
        node = nbformat.read(notebook, as_version=4)
    except Exception as error:  # nbformat raises JSON, Unicode and validation errors of several types
        raise ValueError(f"{notebook} is not a notebook nbformat can read: {error}") from None
    saved = "".join(output.get("data", {}).get("text/html", "") for cell in node.cells for output in cell.get("outputs", []))
    keys = saved_weights_keys(saved)
    unknown = [key for key in keys if key not in shipped_weights()]
    if unknown:
        raise ValueError(f"{notebook}'s explorers name weights {', '.join(unknown)}, which this gptlib does not ship "
                         "(saved with another version? run the notebook again)")
    html, _ = HTMLExporter().from_notebook_node(node)
    if keys:
        head_end = html.index("</head>")
        html = html[:head_end] + embedded_model(keys) + html[head_end:]
    return html, keys


def export(notebook: Path, out: Path | None = None, overwrite: bool = False) -> tuple[Path, list[str]]:
    """Write single_file_html(notebook) to `out` (default: the notebook's name with .html beside it); an existing
    `out` is replaced only with `overwrite`. Returns (out, the keys embedded); refuses with a ValueError before
    writing anything."""
    out = Path(out) if out is not None else Path(notebook).with_suffix(".html")
    if not out.parent.is_dir():
        raise ValueError(f"{out.parent} is not a folder: nothing was written; name a page in an existing folder")
    if out.exists() and not overwrite:
        raise ValueError(f"{out} exists: nothing was written; pass --overwrite to replace it, or name another file")
    if out.resolve() == Path(notebook).resolve():
        raise ValueError(f"{out} is the notebook itself: name another file")
    html, keys = single_file_html(notebook)
    out.write_text(html, encoding="utf-8")
    return out, keys
