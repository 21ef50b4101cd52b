"""The confined processes that run submissions' code.

`python gptlib/course/sandbox.py FD` is a zygote (one per judge): it imports torch, IPython and
gptlib once, never reads a test, and forks one process per submission on the judge's request
(starting a submission then costs a fork, not seconds of imports). The forked process first
confines itself, before it runs anything of the submission:
- as root: a new network namespace (no interface but a down loopback: no network), a new mount
  namespace in which an empty tmpfs is mounted over every hidden folder (the submissions, the
  autograder with the hidden tests, the grades), every mount made read-only, a small tmpfs as its
  working folder (the only place it can write), then every capability dropped (no mount or
  umount, no way back); not as root it tries an unprivileged user + network namespace only, and
  reports what it could not do. If a step fails as root (mount_setattr needs x86-64 Linux >= 5.12)
  the submission is not run: the judge reports that it could not be confined;
- limits (resource.setrlimit): address space, CPU seconds, the size of any file it writes, no
  core files. Its stdout and stderr are a pipe the judge reads and cuts at the output limit.
Then it runs the cells the judge sends (in an IPython shell, so magics and display() work), and
answers the judge's requests through the pipe: what a name is, and calls of the submission's
functions with the arguments the judge's checker chose. Everything it sends back is plain data
(numbers, strings, tensors, lists), read by the judge with torch.load(weights_only=True).
"""

from __future__ import annotations

import ctypes
import io
import json
import math
import numbers
import os
import pickle
import resource
import signal
import socket
import sys
import time
import traceback
from multiprocessing.connection import Connection

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000
MS_REC, MS_PRIVATE = 16384, 1 << 18
SYS_MOUNT_SETATTR, AT_FDCWD, AT_RECURSIVE, MOUNT_ATTR_RDONLY = 442, -100, 0x8000, 1  # x86-64 Linux >= 5.12
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 24, 38


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64), ("propagation", ctypes.c_uint64),
                ("userns_fd", ctypes.c_uint64)]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


_LIBC = ctypes.CDLL(None, use_errno=True)


def _libc_call(name: str, *args) -> None:
    if getattr(_LIBC, name)(*args) != 0:
        raise OSError(ctypes.get_errno(), f"{name}: {os.strerror(ctypes.get_errno())}")


def _read_only_root() -> None:
    """Every mount of this namespace read-only (the submission cannot change gptlib, the venv, anything)."""
    attr = _MountAttr(MOUNT_ATTR_RDONLY, 0, 0, 0)
    _libc_call("syscall", SYS_MOUNT_SETATTR, AT_FDCWD, b"/", AT_RECURSIVE, ctypes.byref(attr), ctypes.sizeof(attr))


def _drop_capabilities() -> None:
    """Stay uid 0 (the interpreter may live in root's home) but with no capability: no mount, no
    umount, no reading another user's files, no way back (no_new_privs)."""
    last = int(open("/proc/sys/kernel/cap_last_cap").read())
    for cap in range(last + 1):
        _libc_call("prctl", PR_CAPBSET_DROP, cap, 0, 0, 0)
    _libc_call("prctl", PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    empty = (ctypes.c_uint32 * 6)()
    _libc_call("capset", ctypes.byref(_CapHeader(0x20080522, 0)), empty)


def confine(hide: list[str], memory: int, cpu_s: int, output: int) -> dict:
    """Isolate and limit this process; returns what was achieved, for the grader's record."""
    done = {"network": False, "hidden": False, "read_only": False, "capabilities_dropped": False}
    if os.geteuid() == 0:
        _libc_call("unshare", CLONE_NEWNET | CLONE_NEWNS)
        done["network"] = True
        _libc_call("mount", None, b"/", None, MS_REC | MS_PRIVATE, None)
        for path in hide:
            _libc_call("mount", b"tmpfs", os.fsencode(path), b"tmpfs", 0, b"size=64k,mode=000")
        done["hidden"] = True
        folder = os.getcwd()
        _read_only_root()
        _libc_call("mount", b"tmpfs", os.fsencode(folder), b"tmpfs", 0, f"size={max(output, 16 * 2**20)},mode=0700".encode())
        os.chdir(folder)  # the fresh, writable tmpfs: the only place it can write
        done["read_only"] = True
        _drop_capabilities()
        done["capabilities_dropped"] = True
    else:
        try:
            _libc_call("unshare", CLONE_NEWUSER | CLONE_NEWNET)
            done["network"] = True
        except OSError:
            pass
    for limit, value in ((resource.RLIMIT_AS, memory), (resource.RLIMIT_CPU, cpu_s), (resource.RLIMIT_FSIZE, output),
                         (resource.RLIMIT_CORE, 0)):
        resource.setrlimit(limit, (value, value))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the output limit a write fails instead of killing
    return done


def _plain(value):
    """value as what torch.load(weights_only=True) reads: numpy arrays become tensors, numpy numbers Python ones."""
    import numpy as np
    import torch

    if isinstance(value, np.ndarray):
        return torch.from_numpy(value.copy())
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, numbers.Number) and type(value) not in (bool, int, float, complex):
        return _number(value)
    if isinstance(value, (list, tuple)):
        return (list if isinstance(value, list) else tuple)(_plain(v) for v in value)  # a namedtuple as its tuple
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (bool, int, float, complex, str, type(None), torch.Tensor)):
        return value.detach() if isinstance(value, torch.Tensor) else value
    raise TypeError(type(value).__name__)


def _number(value: numbers.Number):
    """A number of another type (Fraction, Decimal, an int or float subclass) as the built-in one the
    checkers read it as: a whole value as int (exactly), else float or complex."""
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        number = float(value)
        return int(value) if math.isfinite(number) and value == int(value) else number
    return complex(value)


class CappedOutput(io.TextIOBase):
    """sys.stdout / sys.stderr of the submission: past `limit` characters in all, every write raises, so
    the cell or function that floods the output fails with the reason (and its part scores zero)."""

    def __init__(self, stream, limit: int, counter: list):
        self.stream, self.limit, self.counter = stream, limit, counter

    def write(self, text: str) -> int:
        self.counter[0] += len(text)
        if self.counter[0] > self.limit:
            raise OSError(f"printed more than {self.limit:,} characters (the grader's output limit)")
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()


def _send(connection: Connection, *message) -> None:
    import torch

    buffer = io.BytesIO()
    torch.save(message, buffer)
    connection.send_bytes(buffer.getvalue())


def _reply_value(connection: Connection, kind: str, value) -> None:
    try:
        _send(connection, kind, _plain(value))
    except Exception:  # not plain data, or torch.save could not write it
        _send(connection, "unsendable", type(value).__name__)


def _error_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"[:400]


def _run_cells(shell, connection: Connection, cells: list[tuple[int, str]]) -> None:
    for index, source in cells:
        _send(connection, "cell", index)
        result = shell.run_cell(source, store_history=False)
        error = result.error_before_exec or result.error_in_exec
        _send(connection, "cell_done", index, None if error is None else _error_text(error))


def _serve(shell, inbound: Connection, connection: Connection) -> None:
    from gptlib.exercises.result import raised_by_a_stub  # the checkers' own rule for "not attempted yet"

    namespace = shell.user_ns
    while True:
        request = pickle.loads(inbound.recv_bytes())
        if request[0] == "get":
            name = request[1]
            if name not in namespace:
                _send(connection, "missing")
            elif callable(namespace[name]):
                _send(connection, "function", str(getattr(namespace[name], "__name__", name))[:60])
            else:
                _reply_value(connection, "value", namespace[name])
        elif request[0] == "call":
            _, name, args = request
            try:
                value = namespace[name](*args)
            except NotImplementedError as error:
                _send(connection, "raise", type(error).__name__, str(error)[:400], raised_by_a_stub(error))
            except Exception as error:
                _send(connection, "raise", type(error).__name__, str(error)[:400], False)
            else:
                _reply_value(connection, "return", value)


def run_submission(inbound: Connection, outbound: Connection, hide: list[str], memory: int, cpu_s: int, output: int) -> None:
    """Confine this (forked) process, run the cells the judge sends, then answer its requests until it hangs up."""
    try:
        confined = confine(hide, memory, cpu_s, output)
    except OSError as error:  # never run a submission less confined than asked
        _send(outbound, "ready", {"failed": str(error)})
        return
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.enabled = False
    shell = InteractiveShell.instance(config=config)
    printed = [0]
    sys.stdout, sys.stderr = (CappedOutput(stream, output, printed) for stream in (sys.stdout, sys.stderr))
    _send(outbound, "ready", confined)
    _run_cells(shell, outbound, pickle.loads(inbound.recv_bytes()))
    _send(outbound, "ran")
    try:
        _serve(shell, inbound, outbound)
    except EOFError:  # the judge is done
        pass


def _fork_submission(request: dict, fds: list[int], server: socket.socket) -> int:
    """Fork one submission's process from the warm zygote; returns its pid (its own process group)."""
    pid = os.fork()
    if pid:
        for fd in fds:
            os.close(fd)
        return pid
    code = 1
    try:
        server.close()
        os.setsid()
        inbound, outbound, printed = fds
        os.dup2(printed, 1)
        os.dup2(printed, 2)
        sys.stdout, sys.stderr = (io.TextIOWrapper(os.fdopen(fd, "wb", 0), write_through=True) for fd in (1, 2))
        os.chdir(request["folder"])
        os.environ.update(request["env"])
        run_submission(Connection(inbound), Connection(outbound), request["hide"], request["memory"], request["cpu_s"],
                       request["output"])
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(code)


def zygote(server_fd: int) -> None:
    """Import torch, IPython and gptlib once, then fork a submission's process for each request of the
    judge: starting one costs a fork, not an interpreter and torch's import. Requests come on a Unix
    socket with the submission's three pipe ends; it answers the pid, or the exit status of a pid."""
    import numpy  # noqa: F401  (imported here so that every forked submission finds them loaded)
    import torch
    from IPython.core import interactiveshell  # noqa: F401

    import gptlib.exercises  # noqa: F401

    torch.set_num_threads(1)
    server = socket.socket(fileno=server_fd)
    ended: dict[int, int] = {}
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(server, 65536, 3)
        except OSError:
            return
        if not message:
            return  # the judge closed its end
        request = json.loads(message)
        if "folder" in request:
            reply = {"pid": _fork_submission(request, fds, server)}
        else:
            reply = {"status": _wait(request["status"], ended, request["seconds"])}
        server.sendall(json.dumps(reply).encode())


def _wait(pid: int, ended: dict[int, int], seconds: float = 5.0) -> int | None:
    """The exit status of a forked submission (negative: the signal), waiting for it up to `seconds`."""
    deadline = time.monotonic() + seconds
    while pid not in ended and time.monotonic() < deadline:
        try:
            done, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if done:
            ended[done] = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        else:
            time.sleep(0.01)
    return ended.pop(pid, None)


if __name__ == "__main__":
    del sys.path[0]  # run as a file: its own folder is not a place to import from
    zygote(int(sys.argv[1]))
