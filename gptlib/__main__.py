"""The notebooks, copied where a learner wants them, JupyterLab opened on them, one saved as a page.

    python -m gptlib notebooks DIR [--overwrite]   copy the numbered notebooks into DIR
    python -m gptlib lab DIR [--overwrite]         the same, then JupyterLab on 127.0.0.1 in DIR
    python -m gptlib html NOTEBOOK [OUT] [--overwrite]
                                                   NOTEBOOK as one HTML file whose explorers run typed text
                                                   with no kernel (gptlib.viz.page_export)

The notebooks come from the installed package (the wheel carries them as gptlib/notebooks) or, in a
clone of the repository, from its notebooks/ folder. A notebook already in DIR that differs from the
shipped one (the learner's own work) is never replaced without --overwrite: then nothing is copied.
"""

from __future__ import annotations

import argparse
import filecmp
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
SHIPPED = (PACKAGE / "notebooks", PACKAGE.parent / "notebooks")  # a wheel's copy; a clone's folder


def shipped_notebooks() -> list[Path]:
    """The numbered notebooks 00 ... 09 that came with this gptlib."""
    for folder in SHIPPED:
        notebooks = sorted(folder.glob("[0-9][0-9]_*.ipynb"))
        if notebooks:
            return notebooks
    raise SystemExit(f"error: no notebooks found beside gptlib (looked in {', '.join(map(str, SHIPPED))})")


def copy_notebooks(folder: Path, overwrite: bool = False) -> list[Path]:
    """Copy the shipped notebooks into `folder` (created if missing); returns the copies.

    Refuses, before copying anything, when `folder` is a file, or when a notebook there differs from
    the shipped one and `overwrite` is false. An identical copy is left as it is.
    """
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise SystemExit(f"error: {folder} exists and is not a folder")
    notebooks = shipped_notebooks()
    if folder.resolve() == notebooks[0].parent.resolve():
        return notebooks  # already where they ship (a clone opening its own notebooks/)
    targets = [folder / notebook.name for notebook in notebooks]
    edited = [t.name for n, t in zip(notebooks, targets) if t.exists() and not filecmp.cmp(n, t, shallow=False)]
    if edited and not overwrite:
        raise SystemExit(
            f"error: {len(edited)} notebook(s) in {folder} differ from the shipped ones (your own work?): "
            f"{', '.join(edited)}. Nothing was copied; pass --overwrite to replace them, or choose another folder."
        )
    folder.mkdir(parents=True, exist_ok=True)
    for notebook, target in zip(notebooks, targets):
        shutil.copyfile(notebook, target)
    return targets


def jupyter_lab_command(folder: Path) -> list[str]:
    """JupyterLab serving `folder`, reachable from this machine only."""
    command = [sys.executable, "-m", "jupyterlab", "--ip=127.0.0.1", f"--ServerApp.root_dir={folder}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")
    return command


def export_html(notebook: Path, out: Path | None, overwrite: bool) -> int:
    """`python -m gptlib html`: gptlib.viz.page_export.export, its refusals as one line."""
    if importlib.util.find_spec("nbconvert") is None:
        raise SystemExit("error: nbconvert is not installed in this environment: install gptlib with its notebooks extra")
    from gptlib.viz.page_export import export

    try:
        written, keys = export(notebook, out, overwrite)
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None
    held = f"the weights {', '.join(keys)} and gpt.js embedded" if keys else "no explorer runs a shipped model: nothing embedded"
    print(f"{written}: {written.stat().st_size:,} bytes, {held}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gptlib", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name, what in (("notebooks", "copy the numbered notebooks into FOLDER"),
                       ("lab", "copy them, then open JupyterLab there")):
        command = commands.add_parser(name, help=what)
        command.add_argument("folder", type=Path, help="where the notebooks go (created if missing)")
        command.add_argument("--overwrite", action="store_true", help="replace notebooks there that differ from the shipped ones")
    html = commands.add_parser("html", help="NOTEBOOK as one HTML file whose explorers run typed text with no kernel")
    html.add_argument("notebook", type=Path, help="the notebook (.ipynb)")
    html.add_argument("out", type=Path, nargs="?", help="the page to write (default: NOTEBOOK's name with .html)")
    html.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
    args = parser.parse_args(argv)
    if args.command == "html":
        return export_html(args.notebook, args.out, args.overwrite)
    if args.command == "lab" and importlib.util.find_spec("jupyterlab") is None:
        raise SystemExit("error: JupyterLab is not installed in this environment: install gptlib with its notebooks extra")
    copies = copy_notebooks(args.folder, args.overwrite)
    print(f"{len(copies)} notebooks in {args.folder}")
    if args.command == "lab":
        return subprocess.call(jupyter_lab_command(args.folder))
    return 0


if __name__ == "__main__":
    sys.exit(main())
