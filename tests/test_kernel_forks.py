"""nbval's kernels are forks of a process that imported torch already, and behave as fresh ones
(tests/support/kernel_forks.py): same folder, environment and arguments, interrupted by a signal,
gone when jupyter_client kills what it started. Its deaths are tested in test_kernel_watchdog.py.
"""

import os
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from nbval.kernel import CURRENT_ENV_KERNEL_NAME, RunningKernel

from tests.support import kernel_forks

pytestmark = pytest.mark.slow  # starts processes or trains: `pytest -m slow` (not in `pytest -m unit`)

needs_forks = pytest.mark.skipif(not kernel_forks.available(), reason="kernels start fresh here (no fork or pidfd_open)")


@contextmanager
def kernel_in(folder):
    """A kernel started as nbval starts one, in `folder`; stopped as nbval stops it (SIGKILL)."""
    kernel = RunningKernel(CURRENT_ENV_KERNEL_NAME, cwd=str(folder))
    try:
        yield kernel
    finally:
        kernel.stop()


def run(kernel: RunningKernel, code: str) -> str:
    """Execute `code`; its text output."""
    return outcome(kernel, kernel.kc.execute(code))


def outcome(kernel: RunningKernel, msg_id: str, timeout: float = 60) -> str:
    """The text output of the execution `msg_id`, and the name of its error if it raised one."""
    text = ""
    while True:
        message = kernel.kc.get_iopub_msg(timeout=timeout)
        if message["parent_header"].get("msg_id") != msg_id:
            continue
        if message["msg_type"] == "stream":
            text += message["content"]["text"]
        if message["msg_type"] == "error":
            text += message["content"]["ename"]
        if message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":
            return text


def gone(pid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """One working folder for the kernels below, so they share one fork server."""
    return tmp_path_factory.mktemp("kernels")


@needs_forks
def test_a_forked_kernel_is_a_fresh_kernel_in_all_but_its_imports(folder, monkeypatch):
    monkeypatch.setenv("GPTLIB_TEST_VARIABLE", "seen")
    with kernel_in(folder) as kernel:
        launcher = kernel.km.provisioner.process
        seen = run(kernel, "import os, sys\nprint(os.getpid(), os.getppid(), 'torch' in sys.modules, os.getcwd(), "
                           "sys.path[0], os.environ.get('GPTLIB_TEST_VARIABLE'), os.environ['JPY_PARENT_PID'])")
        pid, parent, preloaded, cwd, path, variable, jpy_parent = seen.split()
        server = Path(f"/proc/{parent}/cmdline").read_bytes().decode().split("\0")  # the kernel's parent process
        assert server[1:4] == [os.path.abspath(kernel_forks.__file__), "serve", kernel_forks.fork_server(str(folder))]
        assert int(parent) != launcher.pid and preloaded == "True", seen
        assert cwd == path == str(folder) and variable == "seen" and int(jpy_parent) == os.getpid(), seen

        started = time.monotonic()
        interrupted = kernel.kc.execute("import time\ntime.sleep(60)")
        time.sleep(1)
        kernel.interrupt()  # jupyter_client signals the launcher's process group; the launcher passes it on
        assert outcome(kernel, interrupted, timeout=30) == "KeyboardInterrupt" and time.monotonic() - started < 30
        assert run(kernel, "print(6 * 7)") == "42\n"  # and it goes on
    # stopped: SIGKILL to the launcher's process group, which the kernel does not belong to
    assert gone(int(pid), within_s=10), "the kernel outlived its launcher"
    assert launcher.wait(timeout=10) == -9


# Whether matplotlib was loaded before the first cell, then what preloaded modules read from the
# environment when imported (kernel_forks._redo_import_time_reads).
IMPORT_TIME_READS = ("import os, sys\nprint('matplotlib' in sys.modules)\n"
                     "import matplotlib\nfrom ipykernel.kernelapp import IPKernelApp\n"
                     "print(matplotlib.rcParams['backend'], os.environ['MPLBACKEND'], IPKernelApp.instance().parent_handle)")


@needs_forks
def test_a_forked_kernel_reads_what_a_fresh_one_reads_at_import(tmp_path, monkeypatch):
    with kernel_in(tmp_path) as kernel:  # a server of its own, started with this environment
        forked = run(kernel, IMPORT_TIME_READS)
    monkeypatch.setenv("GPTLIB_FRESH_KERNELS", "1")
    with kernel_in(tmp_path) as kernel:
        fresh = run(kernel, IMPORT_TIME_READS)
    assert forked.split()[0] == "True" and fresh.split()[0] == "False", (forked, fresh)  # preloaded, or not
    assert forked.split()[1:] == fresh.split()[1:], (forked, fresh)
    assert fresh.split()[1:] == ["module://matplotlib_inline.backend_inline"] * 2 + [str(os.getpid())]


def test_a_kernel_whose_environment_differs_from_the_servers_is_refused():
    server = {"PATH": "/bin", "ATEN_CPU_CAPABILITY": "avx2", "JPY_PARENT_PID": "1"}
    kernel = server | {"JPY_PARENT_PID": "2", "JPY_SESSION_NAME": "x", "PYTEST_CURRENT_TEST": "t"}
    assert kernel_forks.differences(kernel, server) == []
    assert kernel_forks.differences(kernel | {"ATEN_CPU_CAPABILITY": "default"}, server) == ["ATEN_CPU_CAPABILITY"]
    assert kernel_forks.differences({k: v for k, v in kernel.items() if k != "PATH"} | {"OMP_NUM_THREADS": "1"},
                                    server) == ["OMP_NUM_THREADS", "PATH"]


FRESH = "import os, sys\nprint(os.getppid() == int(os.environ['JPY_PARENT_PID']), 'torch' in sys.modules)"


@needs_forks
def test_a_kernel_the_server_refuses_starts_fresh(folder, monkeypatch):
    kernel_forks.fork_server(str(folder))  # started with GPTLIB_TEST_VARIABLE unset
    monkeypatch.setenv("GPTLIB_TEST_VARIABLE", "set after the server started")
    with kernel_in(folder) as kernel:
        assert run(kernel, FRESH).split() == ["True", "False"]


def test_with_forks_turned_off_kernels_start_fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("GPTLIB_FRESH_KERNELS", "1")
    with kernel_in(tmp_path) as kernel:
        assert run(kernel, FRESH).split() == ["True", "False"]
