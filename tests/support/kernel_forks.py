"""Notebook kernels forked from a process that has imported torch already, for nbval's many kernels.

Every notebook nbval checks starts a kernel, and every kernel spends about 4 s on `import torch` and
gptlib before its first cell, and 1-2 s more on ipykernel, matplotlib and the widgets: some 40 starts in
`make test` (the plain pass and three simulated CPUs), a fifth of the suite's CPU time. Here a server
process imports them once (PRELOAD); each kernel is a fork of it that then runs ipykernel exactly as
`python -m ipykernel_launcher -f <connection file>` would.

jupyter_client still starts and watches a process of its own, the launcher (`python -S this_file
launch -f <connection file>`, standard library only, under 0.1 s). The launcher sends the server its working
folder, environment, arguments and stdin/stdout/stderr; the server forks the kernel; the launcher
passes on every signal jupyter_client sends it (interrupt, terminate) to the kernel's process group,
and when the kernel ends it ends the same way: the same exit code, or killed by the same signal, so a
kernel's death reads exactly as it would for a fresh one (tests/support/kernel_watchdog.py). If the
launcher is killed (SIGKILL, which cannot be passed on), the kernel sees it go and kills itself.

The kernel gets the launcher's environment, but torch read the server's at import: the server refuses
a kernel whose environment differs in anything but the variables jupyter_client and pytest set per
kernel or test (PER_KERNEL), and the launcher then starts a fresh kernel instead. One preloaded module
reads a value that ipykernel sets only once the kernel starts, matplotlib its backend; the kernel is
given its own (_redo_import_time_reads). Where fork or pidfd is missing (macOS, Windows), or
GPTLIB_FRESH_KERNELS=1 is set, every kernel is fresh.
"""

from __future__ import annotations

import atexit
import importlib
import importlib.util
import json
import os
import pkgutil
import resource
import select
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import traceback
import warnings

SERVER_ADDRESS = "GPTLIB_KERNEL_FORK_SERVER"  # the environment variable naming the server's socket
# What the server imports for every kernel, with every module of gptlib.viz (matplotlib, ipywidgets).
# Not ipykernel.kernelapp: it reads JPY_PARENT_PID, set per kernel, when imported (0.01 s after these).
PRELOAD = ("torch", "gptlib", "ipykernel.ipkernel")
PER_KERNEL = ("JPY_", "PYDEVD_", "PYTEST_CURRENT_TEST", SERVER_ADDRESS)
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
MESSAGE_BYTES = 1 << 20
STARTUP_S = 120


def available() -> bool:
    """Whether kernels can be forked here: Linux's fork and pidfd_open, and not turned off."""
    return hasattr(os, "pidfd_open") and hasattr(os, "fork") and os.environ.get("GPTLIB_FRESH_KERNELS") != "1"


def launcher_argv() -> list[str]:
    """The kernel spec's argv that asks the server (named in the environment) for a kernel."""
    return [sys.executable, "-S", os.path.abspath(__file__), "launch", "-f", "{connection_file}"]


_SERVERS: dict[str, str | None] = {}  # working folder -> its server's socket address (None: it did not start)


def fork_server(cwd: str) -> str | None:
    """The socket address of a fork server for kernels that run in `cwd`, started (about 4 s) the
    first time; None, with a warning, if it did not start within STARTUP_S."""
    if cwd in _SERVERS:
        return _SERVERS[cwd]
    folder = tempfile.mkdtemp(prefix="kernel_forks_")
    address = os.path.join(folder, "server")
    command = [sys.executable, os.path.abspath(__file__), "serve", address, str(os.getpid())]
    errors = tempfile.TemporaryFile()
    # os.environ, as jupyter_client gives a kernel: the C environment can hold more (readline, once
    # imported in this process, puts COLUMNS and LINES there).
    server = subprocess.Popen(command, cwd=cwd, env=dict(os.environ), stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=errors)
    ready = selectors.DefaultSelector()
    ready.register(server.stdout, selectors.EVENT_READ)
    if not ready.select(STARTUP_S) or server.stdout.readline() != b"ready\n":
        server.kill()
        errors.seek(0)
        warnings.warn(f"the kernel fork server did not start; kernels start fresh: {errors.read()[-2000:]!r}")
        address = None
    else:
        atexit.register(shutil.rmtree, folder, True)
        atexit.register(server.kill)
    _SERVERS[cwd] = address
    return address


def differences(env: dict[str, str], reference: dict[str, str]) -> list[str]:
    """The variables, other than PER_KERNEL ones, that are set differently in `env` and `reference`."""
    keys = {*env, *reference}
    return sorted(k for k in keys if not k.startswith(PER_KERNEL) and env.get(k) != reference.get(k))


# ---- the launcher: the process jupyter_client starts and watches --------------------------------

def launch(argv: list[str]) -> None:
    """Get a forked kernel running `argv`, pass signals on to it, and end as it ends."""
    try:
        server = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        server.connect(os.environ[SERVER_ADDRESS])
        request = {"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ), "launcher": os.getpid()}
        socket.send_fds(server, [json.dumps(request).encode()], [0, 1, 2])
        reply = json.loads(server.recv(MESSAGE_BYTES) or b'{"refused": "the server closed the connection"}')
    except (KeyError, OSError, ValueError) as error:
        reply = {"refused": f"no fork server ({error!r})"}
    if "refused" in reply:
        print(f"kernel_forks: {reply['refused']}; starting a fresh kernel", file=sys.stderr, flush=True)
        os.execv(sys.executable, [sys.executable, "-m", "ipykernel_launcher", *argv])
    kernel = reply["pid"]
    for signum in FORWARDED:
        signal.signal(signum, lambda signum, _frame: _signal_group(kernel, signum))
    ended = server.recv(MESSAGE_BYTES)
    if not ended:  # the server went away: take the kernel with it
        _signal_group(kernel, signal.SIGKILL)
        os._exit(1)
    end_like(json.loads(ended)["ended"])


def _signal_group(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)
    except ProcessLookupError:
        pass


def end_like(code: int) -> None:
    """Exit with `code`, or, for a negative one, be killed by that signal (without a core file)."""
    if code >= 0:
        os._exit(code)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
    os._exit(128 - code)  # a signal whose default is not to end the process


# ---- the server: imports once, forks a kernel per request ---------------------------------------

def serve(address: str, parent: int) -> None:
    """Import PRELOAD and gptlib.viz, say "ready" on stdout, then fork a kernel for each launcher that
    connects, until the process `parent` ends."""
    sys.path[0] = os.getcwd()  # as for `python -m ipykernel_launcher`, started in the same folder
    for name in PRELOAD:
        importlib.import_module(name)
    viz = importlib.import_module("gptlib.viz")
    for module in pkgutil.iter_modules(viz.__path__, "gptlib.viz."):
        importlib.import_module(module.name)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(address)
    listener.listen()
    parent_ended = os.pidfd_open(parent)
    events = selectors.DefaultSelector()
    events.register(listener, selectors.EVENT_READ)
    events.register(parent_ended, selectors.EVENT_READ)
    print("ready", flush=True)
    kernels: dict[int, tuple[int, socket.socket]] = {}  # pidfd -> (pid, connection to its launcher)
    while True:
        for key, _ in events.select():
            if key.fd == parent_ended:
                for pid, _ in kernels.values():
                    _signal_group(pid, signal.SIGKILL)
                return
            if key.fileobj is listener:
                launcher, _ = listener.accept()
                # what the kernel must not inherit: every socket and descriptor of this server
                started = _fork_kernel(launcher, [listener, *(c for _, c in kernels.values())],
                                       [events.fileno(), parent_ended, *kernels])
                if started is not None:
                    pidfd, pid = started
                    events.register(pidfd, selectors.EVENT_READ)
                    kernels[pidfd] = pid, launcher
            else:
                pid, launcher = kernels.pop(key.fd)
                events.unregister(key.fd)
                os.close(key.fd)
                _, status = os.waitpid(pid, 0)
                _send(launcher, {"ended": os.waitstatus_to_exitcode(status)})
                launcher.close()


def _fork_kernel(launcher: socket.socket, sockets: list[socket.socket], descriptors: list[int]):
    """Read one launcher's request and fork its kernel: (pidfd, pid), or None once refused."""
    data, fds, _, _ = socket.recv_fds(launcher, MESSAGE_BYTES, 3)
    request = json.loads(data)
    refused = _refusal(request, fds)
    if refused is not None:
        for fd in fds:
            os.close(fd)
        _send(launcher, {"refused": refused})
        launcher.close()
        return None
    pid = os.fork()
    if pid == 0:
        try:
            _become_kernel(request, fds, [launcher, *sockets], descriptors)
        finally:
            os._exit(1)
    for fd in fds:  # the kernel holds them now
        os.close(fd)
    _send(launcher, {"pid": pid})
    return os.pidfd_open(pid), pid


def _refusal(request: dict, fds: list[int]) -> str | None:
    """Why this server cannot fork the kernel asked for, or None if it can."""
    differ = differences(request["env"], dict(os.environ))
    if differ:
        return f"the kernel's environment differs from the fork server's in {differ}"
    if request["cwd"] != os.getcwd():
        return f"the kernel runs in {request['cwd']}, the fork server in {os.getcwd()}"
    if len(fds) != 3:
        return f"the launcher sent {len(fds)} file descriptors, not 3"
    return None


def _send(connection: socket.socket, message: dict) -> None:
    try:
        connection.send(json.dumps(message).encode())
    except OSError:  # the launcher has gone (killed): nobody to tell
        pass


def _become_kernel(request: dict, fds: list[int], sockets: list[socket.socket], descriptors: list[int]) -> None:
    """In the forked child: take the launcher's place (stdio, folder, environment, arguments), watch
    the launcher, run ipykernel as ipykernel_launcher does, and exit as a kernel process would."""
    os.setsid()  # a process group of its own, as jupyter_client gives a fresh kernel
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    for connection in sockets:
        connection.close()
    for fd in descriptors:
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.path[0] = request["cwd"]
    sys.argv = [importlib.util.find_spec("ipykernel_launcher").origin, *request["argv"]]
    _redo_import_time_reads()
    launcher = os.pidfd_open(request["launcher"])
    threading.Thread(target=_die_with, args=(launcher,), daemon=True, name="kernel_forks: launcher watch").start()
    code = 0
    try:
        from ipykernel import kernelapp

        kernelapp.launch_new_instance()
    except SystemExit as exit:
        code = exit.code if isinstance(exit.code, int) else 0 if exit.code is None else 1
    except BaseException:
        traceback.print_exc()
        code = 1
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _redo_import_time_reads() -> None:
    """Give the kernel what matplotlib read from the environment when the server imported it, as a
    fresh kernel reads it from its own: the backend, MPLBACKEND, which ipykernel sets to its inline
    backend when unset, before a fresh kernel's notebook imports matplotlib."""
    import matplotlib

    if not os.environ.get("MPLBACKEND"):  # as ipykernel's init_gui_pylab does
        os.environ["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    matplotlib.rcParams["backend"] = os.environ["MPLBACKEND"]  # as `import matplotlib` does


def _die_with(pidfd: int) -> None:
    select.select([pidfd], [], [])
    os.killpg(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    if sys.argv[1] == "launch":
        launch(sys.argv[2:])
    else:  # serve ADDRESS PARENT_PID
        serve(sys.argv[2], int(sys.argv[3]))
