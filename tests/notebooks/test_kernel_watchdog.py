"""A notebook kernel that dies fails its cell within seconds, named (tests/support/kernel_watchdog.py).

Three scratch notebooks, each of whose second cell ends its own kernel in one way, go through nbval in
one fresh pytest process with the suite's own plugin. The dying cell must fail within seconds (nbval alone
would wait --nbval-cell-timeout, here 300 s) and say which notebook, which cell and how the kernel
ended; the cell after it fails at once.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

pytestmark = pytest.mark.slow  # starts processes or trains: `pytest -m slow` (not in `pytest -m unit`)

ROOT = Path(__file__).resolve().parents[2]

ENDINGS = {
    "SIGILL": ("import os, signal; os.kill(os.getpid(), signal.SIGILL)", "was killed by signal SIGILL (4)"),
    "SIGSEGV": ("import ctypes; ctypes.string_at(0)", "was killed by signal SIGSEGV (11)"),
    "exit code": ("import os; os._exit(3)", "exited with code 3"),
}


def test_a_kernel_that_dies_fails_its_cell_within_seconds_and_says_how(tmp_path):
    for n, code in enumerate(code for code, _ in ENDINGS.values()):
        cells = [nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_code_cell(code), nbformat.v4.new_code_cell("x")]
        nbformat.write(nbformat.v4.new_notebook(cells=cells), tmp_path / f"dies_{n}.ipynb")
    command = [sys.executable, "-m", "pytest", "-c", os.devnull, "--rootdir", str(tmp_path), "-p",
               "tests.support.kernel_watchdog", "-p", "no:cacheprovider", "--nbval", "--nbval-current-env",
               "--nbval-cell-timeout=300", "--durations=0", "--durations-min=0", "-q", str(tmp_path)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=240,
                          env=os.environ | {"PYTHONPATH": str(ROOT)})
    out = done.stdout + done.stderr
    assert done.returncode == 1 and f"{2 * len(ENDINGS)} failed, {len(ENDINGS)} passed" in out, out
    for n, (_, how) in enumerate(ENDINGS.values()):
        assert f"the kernel of dies_{n}.ipynb died while running cell 1: it {how}" in out, out
        for cell, within_s in ((1, 20), (2, 5)):  # the dying cell, then the next one
            seconds = float(re.search(rf"([\d.]+)s call +dies_{n}\.ipynb::Cell {cell}\b", out)[1])
            assert seconds < within_s, f"dies_{n}.ipynb's cell {cell} took {seconds} s\n{out}"
    assert out.count("Kernel dead on test start") >= len(ENDINGS), out


def test_the_watchdog_is_loaded_for_every_run_of_this_suite(pytestconfig):
    assert pytestconfig.pluginmanager.has_plugin("tests.support.kernel_watchdog")
