"""A notebook kernel that dies fails its cell within seconds, named (tests/support/kernel_watchdog.py).

Three scratch notebooks, each of whose second cell ends its own kernel in one way, go through nbval in
one fresh pytest process with the suite's own plugin: once with kernels forked from a server that has
imported torch (tests/support/kernel_forks.py, what the suite uses on Linux), once with a fresh one.
The failures must all arrive well inside a minute (nbval alone would wait --nbval-cell-timeout, here
300 s, for every remaining cell) and say which notebook, which cell and how the kernel ended.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

pytestmark = pytest.mark.slow  # starts processes or trains: `pytest -m slow` (not in `pytest -m unit`)

ROOT = Path(__file__).resolve().parent.parent

ENDINGS = {
    "SIGILL": ("import os, signal; os.kill(os.getpid(), signal.SIGILL)", "was killed by signal SIGILL (4)"),
    "SIGSEGV": ("import ctypes; ctypes.string_at(0)", "was killed by signal SIGSEGV (11)"),
    "exit code": ("import os; os._exit(3)", "exited with code 3"),
}


# Forked kernels, this suite's, end in all three ways: each goes through the launcher's relay. A fresh
# kernel (other systems) is the process the watchdog reads directly; one ending shows that path works.
@pytest.mark.parametrize("fresh, endings", [("0", ENDINGS), ("1", {"SIGILL": ENDINGS["SIGILL"]})],
                         ids=["forked kernels", "fresh kernels"])
def test_a_kernel_that_dies_fails_its_cell_within_seconds_and_says_how(tmp_path, fresh, endings):
    for n, code in enumerate(code for code, _ in endings.values()):
        cells = [nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_code_cell(code), nbformat.v4.new_code_cell("x")]
        nbformat.write(nbformat.v4.new_notebook(cells=cells), tmp_path / f"dies_{n}.ipynb")
    command = [sys.executable, "-m", "pytest", "-c", os.devnull, "--rootdir", str(tmp_path), "-p",
               "tests.support.kernel_watchdog", "-p", "no:cacheprovider", "--nbval", "--nbval-current-env",
               "--nbval-cell-timeout=300", "-q", str(tmp_path)]
    start = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env=os.environ | {"PYTHONPATH": str(ROOT), "GPTLIB_FRESH_KERNELS": fresh})
    seconds, out = time.monotonic() - start, done.stdout + done.stderr
    assert done.returncode == 1 and f"{2 * len(endings)} failed, {len(endings)} passed" in out, out
    assert seconds < 60, f"the failures took {seconds:.0f} s\n{out}"
    for n, (_, how) in enumerate(endings.values()):
        assert f"the kernel of dies_{n}.ipynb died while running cell 1: it {how}" in out, out
        assert f"not run: the kernel of dies_{n}.ipynb died at an earlier cell and {how}" in out, out


def test_the_watchdog_is_loaded_for_every_run_of_this_suite(pytestconfig):
    assert pytestconfig.pluginmanager.has_plugin("tests.support.kernel_watchdog")
