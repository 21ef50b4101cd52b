"""Ctrl-C (SIGINT) and SIGTERM stop a command of the kit at any moment, whatever it inherited.

A process started as a shell script's background job (`grade ... &`, a CI runner's) starts with SIGINT
ignored, and Python then keeps ignoring it: `kill -INT` did nothing, and `grade` went on with the whole
class. So the program sets both signals itself:

    stop_at_once()         its first step, before the imports (torch: seconds): a signal ends it there
                           and then, "interrupted", nothing being started or written yet
    raising_on_signals()   around the command: a signal raises Interrupted where the command is, which
                           unwinds it (the judges are killed, a file half written is removed: every file
                           is written whole or not at all) before it says "interrupted"

The exit code is 128 + the signal's number, as a shell reports a process a signal ended: 130 for
SIGINT, 143 for SIGTERM (exit_code). Then the program ends at once (end_now): the interpreter's teardown
of a process that imported torch costs seconds of CPU (3 s on a loaded 2-core AMD EPYC VM, and 26 s at
nice 10 beside a load of 15), which an interrupted command has no use for.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived (`signal`); a KeyboardInterrupt, so no `except Exception` swallows it."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signal = signum


def exit_code(stop: KeyboardInterrupt) -> int:
    """128 + the signal's number (a plain KeyboardInterrupt is SIGINT's)."""
    return 128 + getattr(stop, "signal", signal.SIGINT)


def _exit_now(signum: int, frame) -> None:
    os.write(2, b"interrupted\n")
    os._exit(128 + signum)


def _raise(signum: int, frame) -> None:
    raise Interrupted(signum)


def end_now(code: int) -> None:
    """End the process with `code` now, its output written (no teardown: what it started is ended already)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def stop_at_once() -> None:
    """From now on SIGINT and SIGTERM end this process at once (the program's first step)."""
    for signum in SIGNALS:
        signal.signal(signum, _exit_now)


@contextlib.contextmanager
def raising_on_signals():
    """Within: SIGINT and SIGTERM raise Interrupted in the main thread; the handlers before are restored
    after (a command run in-process, by a test, leaves its process as it was). Elsewhere than in the main
    thread, which alone can set handlers, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {signum: signal.signal(signum, _raise) for signum in SIGNALS}
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
