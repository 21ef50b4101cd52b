"""Costly test inputs made once per test run, however many pytest-xdist workers ask for them.

A session-scoped fixture runs once per worker: with `make test`'s workers (`--dist loadfile`) two test
files needing the same built book would build it twice, on different workers. `once_per_run` builds it in
the folder the run's workers share (the parent of each worker's own temporary folder), under a file lock:
the first worker to ask builds, the others wait for it and read the same files. A build that fails leaves
nothing behind, so the next worker to ask tries again and fails for itself.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock  # a dependency of torch

DONE = ".built"


def run_folder(tmp_path_factory) -> Path:
    """The temporary folder of this test run: shared by all its xdist workers, this process's own without xdist."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def once_per_run(tmp_path_factory, name: str, make: Callable[[Path], Path]) -> Path:
    """make(folder) -> a path inside folder, run once per test run in folder = <run folder>/<name>; every
    caller, in any worker, gets that path."""
    folder = run_folder(tmp_path_factory) / name
    with FileLock(f"{folder}.lock"):
        done = folder / DONE
        if not done.is_file():
            shutil.rmtree(folder, ignore_errors=True)  # what a failed build left
            folder.mkdir()
            made = make(folder)
            done.write_text(str(made.relative_to(folder)))
        return folder / done.read_text()
