"""A pytest plugin that makes nbval notice a dead notebook kernel within seconds.

nbval sends a cell to the kernel and waits up to --nbval-cell-timeout for the reply. If the kernel
process has died (a segfault, torch's SIGILL on a CPU that lacks an instruction set asked for, an
out-of-memory kill), no reply ever comes, and nbval waits the whole timeout for every remaining cell.
This plugin waits in slices of POLL_S seconds and checks the kernel process between them: a dead
kernel fails its cell at once, naming the notebook, the cell and how the process ended, and the
notebook's later cells fail without waiting.

It also starts a kernel a second time when the first start does not answer in time
(--nbval-kernel-startup-timeout), which was seen under heavy load with ipykernel 7; a second failure
fails the notebook, so a start can never hang a run.

And it starts nbval's kernels as forks of a process that has imported torch already
(tests/support/kernel_forks.py), where the system allows it: a kernel then starts in a fraction of a
second instead of about 4 s, and dies, is interrupted and ends exactly as a fresh one would.
"""

from __future__ import annotations

import os
import signal
import time
import warnings
from queue import Empty

import nbval.kernel
from nbval.kernel import CURRENT_ENV_KERNEL_NAME, NbvalKernelspecManager, RunningKernel
from nbval.plugin import IPyNbCell, IPyNbFile, NbCellError

from tests.support import kernel_forks

POLL_S = 1.0


class KernelDied(RuntimeError):
    """The kernel process ended while a cell was waiting for it; the message says how."""


def how_it_ended(kernel: RunningKernel) -> str | None:
    """'was killed by signal SIGILL (4)' or 'exited with code 3' once the kernel process has ended, else None."""
    manager = getattr(kernel, "km", None)
    process = getattr(getattr(manager, "provisioner", None), "process", None)
    code = process.poll() if process is not None else None
    if code is None:
        return None if manager is not None and manager.is_alive() else "ended (its exit status is unknown)"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = "an unknown signal"
        return f"was killed by signal {name} ({-code})"
    return f"exited with code {code}"


_await_reply = RunningKernel.await_reply


def await_reply_while_alive(self: RunningKernel, msg_id: str, timeout: float | None = None):
    """nbval's await_reply, in slices of POLL_S seconds with a look at the kernel process between them."""
    deadline = None if timeout is None else time.monotonic() + float(timeout)
    while True:
        left = POLL_S if deadline is None else min(POLL_S, deadline - time.monotonic())
        if left <= 0:
            raise Empty
        try:
            return _await_reply(self, msg_id, timeout=left)
        except Empty:
            ended = how_it_ended(self)
            if ended is not None:
                raise KernelDied(ended) from None


_runtest = IPyNbCell.runtest


def runtest_or_report_death(self: IPyNbCell) -> None:
    notebook = self.parent.fspath.basename
    if self.parent.kernel is not None and not self.parent.kernel.is_alive():
        ended = how_it_ended(self.parent.kernel)
        raise NbCellError(self.cell_num, f"not run: the kernel of {notebook} died at an earlier cell and {ended}",
                          self.cell.source)
    try:
        _runtest(self)
    except KernelDied as died:
        raise NbCellError(self.cell_num, f"the kernel of {notebook} died while running cell {self.cell_num}: it {died}",
                          self.cell.source) from None


_setup = IPyNbFile.setup


def setup_with_one_retry(self: IPyNbFile) -> None:
    try:
        _setup(self)
    except RuntimeError as first:  # jupyter_client: the kernel did not answer within the startup timeout
        warnings.warn(f"{self.fspath.basename}: the kernel did not start ({first}); starting it once more")
        _setup(self)


_start_new_kernel = nbval.kernel.start_new_kernel


def start_new_kernel_from_a_fork(startup_timeout=60, kernel_name="python", **kwargs):
    """nbval's start_new_kernel, telling the launcher (the kernel spec below) which fork server to ask."""
    if kernel_name == CURRENT_ENV_KERNEL_NAME and kernel_forks.available():
        address = kernel_forks.fork_server(str(kwargs.get("cwd") or os.getcwd()))
        if address is not None:
            kwargs["env"] = os.environ | {kernel_forks.SERVER_ADDRESS: address}
    return _start_new_kernel(startup_timeout, kernel_name, **kwargs)


_get_kernel_spec = NbvalKernelspecManager.get_kernel_spec


def kernel_spec_of_a_fork(self, kernel_name):
    """The current environment's kernel spec, with kernel_forks' launcher in place of ipykernel_launcher."""
    spec = _get_kernel_spec(self, kernel_name)
    if kernel_name == CURRENT_ENV_KERNEL_NAME and kernel_forks.available():
        spec.argv = kernel_forks.launcher_argv()
    return spec


nbval.kernel.start_new_kernel = start_new_kernel_from_a_fork
NbvalKernelspecManager.get_kernel_spec = kernel_spec_of_a_fork
RunningKernel.await_reply = await_reply_while_alive
IPyNbCell.runtest = runtest_or_report_death
IPyNbFile.setup = setup_with_one_retry
