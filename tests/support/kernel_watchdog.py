"""A pytest plugin: a notebook kernel that dies fails its cell within seconds, saying how it ended.

nbval sends a cell to the kernel and waits up to --nbval-cell-timeout for the reply; a kernel that
has died (a segfault, torch's SIGILL on a CPU without an instruction set asked for, an out-of-memory
kill) never replies. While nbval runs a cell, a thread here looks at the kernel's process every POLL_S
seconds; once it has ended, the thread signals the main thread, whose handler fails the cell with
how the process ended. nbval then fails the notebook's later cells at once ("Kernel dead on test
start"). Only public names are used: pytest's hooks, nbval's cell items and the kernel's process as
jupyter_client's local provisioner holds it (a subprocess.Popen).
"""

from __future__ import annotations

import signal
import threading

import pytest
from nbval.plugin import IPyNbCell, NbCellError

POLL_S = 1.0
SIGNAL = signal.SIGUSR1


def how_it_ended(code: int) -> str:
    """'was killed by signal SIGILL (4)' or 'exited with code 3', from a Popen return code: for a developer, any
    signal by its name (the kit's judge words the few a submission meets for a student: judge._how_it_ended)."""
    if code >= 0:
        return f"exited with code {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = "an unknown signal"
    return f"was killed by signal {name} ({-code})"


class Watch:
    """The cell being run, and how its kernel ended once the watching thread has seen it end."""

    cell: IPyNbCell | None = None
    ended: str | None = None


def _fail_the_cell(signum, frame):
    cell, ended = Watch.cell, Watch.ended
    if cell is not None and ended is not None:
        notebook = cell.parent.path.name
        raise NbCellError(cell.cell_num, f"the kernel of {notebook} died while running cell {cell.cell_num}: it {ended}",
                          cell.cell.source)


def _watch(process, main: int, done: threading.Event) -> None:
    while not done.wait(POLL_S):
        code = process.poll()
        if code is not None:
            Watch.ended = how_it_ended(code)
            signal.pthread_kill(main, SIGNAL)
            return


def pytest_configure(config):
    if threading.current_thread() is threading.main_thread():
        signal.signal(SIGNAL, _fail_the_cell)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    kernel = item.parent.kernel if isinstance(item, IPyNbCell) else None
    process = getattr(getattr(getattr(kernel, "km", None), "provisioner", None), "process", None)
    if process is None or threading.current_thread() is not threading.main_thread():
        return (yield)
    Watch.cell, Watch.ended = item, None
    done = threading.Event()
    watcher = threading.Thread(target=_watch, args=(process, threading.get_ident(), done), daemon=True)
    watcher.start()
    try:
        return (yield)
    finally:
        done.set()
        watcher.join()
        Watch.cell = None
