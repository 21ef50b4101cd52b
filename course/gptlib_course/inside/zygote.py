"""The sandbox's first process (PID 1): a zygote that forks one process per submission, and that process.

`python -P -m gptlib_course.inside.zygote FD /tmp` (sandbox.py starts it inside bubblewrap) is the
namespace's first process: a zygote that imports torch, IPython and gptlib and makes an IPython shell
once, never reads a test, and forks one process per submission on the judge's request (starting a
submission costs a fork, not seconds of imports). Before each fork it kills every other process of its
namespace (kill(-1): whatever the last submission left running, daemons included) and empties /tmp (but
the code the sandbox binds there), so no two submissions ever run in the same namespaces at once and
none inherits another's files. It makes itself non-dumpable (prctl) so that a submission, running as
the same user, cannot attach to it or read its memory; and as PID 1 it ignores every signal it has no
handler for. Each forked process starts its own session and sets its limits (resource.setrlimit):
address space, CPU seconds, processes (a fork bomb stops there: it runs as a user that is not root in
its namespace, so the limit binds), the size of any file it writes, no core files. Its stdout and
stderr are a pipe the judge reads and cuts at the output limit.

Then it runs the cells the judge sends (in an IPython shell, so magics and display() work), and
answers the judge's requests through the pipe: what a name is, and calls of the submission's
functions with the arguments the judge's checker chose. Everything it sends back is plain data
(numbers, strings, tensors, lists: plain.py), read by the judge as untrusted bytes, at most REPLY_BYTES
a reply. A call that returns an nn.Module (a class of notebook 09's build track, called with the
checker's sizes) keeps it here and describes it; the judge's checker works on a mirror of it, whose
forward runs here (remote_module.py: its protocol).
"""

from __future__ import annotations

import ctypes
import io
import json
import os
import pickle
import resource
import shutil
import signal
import socket
import sys
import time
import traceback
from multiprocessing.connection import Connection
from pathlib import Path

import numpy  # noqa: F401  (imported here so that every forked submission finds it loaded)
import torch
from torch import nn

import gptlib.exercises  # noqa: F401  (every forked submission finds it loaded)
from gptlib.checking import global_state_kept, raised_by_a_stub  # the checkers' own rules

from .plain import plain
from .remote_module import ModuleServer

REPLY_BYTES = 32 * 2**20  # a larger reply is refused here, named (the judge reads none over 64 MiB)
PR_SET_DUMPABLE = 4


def _limit(memory: int, cpu_s: int, output: int, processes: int) -> None:
    for limit, value in ((resource.RLIMIT_AS, memory), (resource.RLIMIT_CPU, cpu_s), (resource.RLIMIT_FSIZE, output),
                         (resource.RLIMIT_CORE, 0), (resource.RLIMIT_NPROC, processes)):
        resource.setrlimit(limit, (value, value))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the output limit a write fails instead of killing


def confinement() -> dict:
    """What this process is, measured from inside: its uid, capabilities, no_new_privs, whether the
    zygote is its namespace's PID 1, and its limits (for the grader's record)."""
    status = dict(line.split(":\t", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":\t" in line)
    return {"uid": os.getuid(), "capabilities": status.get("CapEff", "?").strip(),
            "no_new_privs": status.get("NoNewPrivs", "?").strip() == "1", "pid_namespace": os.getppid() == 1,
            "processes": resource.getrlimit(resource.RLIMIT_NPROC)[0]}


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
    buffer = io.BytesIO()
    torch.save(message, buffer)
    connection.send_bytes(buffer.getvalue())


def _reply_value(connection: Connection, kind: str, value, *tail) -> None:
    """(kind, value as plain data, *tail), or ("unsendable", what value is, *tail); tail: plain already."""
    what = type(value).__name__[:60]
    buffer = io.BytesIO()
    try:
        torch.save((kind, plain(value), *tail), buffer)
    except Exception:  # not plain data, or torch.save could not write it (memory included)
        _send(connection, "unsendable", what, *tail)
        return
    if buffer.tell() > REPLY_BYTES:
        _send(connection, "unsendable", f"{what} of more than {REPLY_BYTES // 2**20} MiB", *tail)
    else:
        connection.send_bytes(buffer.getvalue())


def _message(error: BaseException) -> str:
    """str(error), cut; an exception whose str() itself fails or lies is named by its type only."""
    try:
        return str.__str__(str(error))[:400]
    except Exception:
        return "(its message could not be read)"


def _error_text(error: BaseException) -> str:
    return f"{type(error).__name__[:60]}: {_message(error)}"


def _run_cells(shell, connection: Connection, cells: list[tuple[int, str]]) -> None:
    for index, source in cells:
        _send(connection, "cell", index)
        result = shell.run_cell(source, store_history=False)
        error = result.error_before_exec or result.error_in_exec
        _send(connection, "cell_done", index, None if error is None else _error_text(error))


def _function_name(function, default: str) -> str:
    try:
        return str.__str__(getattr(function, "__name__", default))[:60]
    except Exception:
        return default


def _stub(raised_by_a_stub, error: NotImplementedError) -> bool:
    try:
        return bool(raised_by_a_stub(error))
    except Exception:
        return False


def _call(connection: Connection, namespace: dict, modules, request: tuple) -> None:
    """Run ("call", name, args, state) or ("forward", (handle, node), args, state) under the checker's global
    state (remote_module.py); reply with its outcome and the changes to the parameters of the modules involved."""
    kind, target, args, state = request
    handles = [target[0]] if kind == "forward" else [arg[1] for arg in args if arg[0] == "module"]
    try:
        with global_state_kept():
            torch.set_default_dtype(getattr(torch, state["dtype"]))
            torch.set_grad_enabled(state["grad"])
            torch.random.set_rng_state(state["rng"])
            function = namespace[target] if kind == "call" else modules.node(*target)
            value = function(*modules.arguments(args, state))
    except NotImplementedError as error:
        reply = ("raise", type(error).__name__[:60], _message(error), _stub(raised_by_a_stub, error))
    except Exception as error:
        reply = ("raise", type(error).__name__[:60], _message(error), False)
    else:
        reply = None
    changes = modules.changes(handles)
    if reply is not None:
        _send(connection, *reply, changes)
        return
    if not isinstance(value, nn.Module):
        _reply_value(connection, "return", value, changes)
        return
    try:
        _, handle, tree = modules.described(value)
    except Exception as error:  # too large, or parameters that are not read (another dtype)
        _send(connection, "unsendable", f"{type(value).__name__[:60]} ({_message(error)[:200]})", changes)
        return
    _reply_value(connection, "module", (handle, tree), changes)


def _serve(shell, inbound: Connection, connection: Connection) -> None:
    modules = ModuleServer()
    namespace = shell.user_ns
    while True:
        request = pickle.loads(inbound.recv_bytes())
        if request[0] == "get":
            name = request[1]
            if name not in namespace:
                _send(connection, "missing")
            elif callable(namespace[name]):
                _send(connection, "function", _function_name(namespace[name], name))
            else:
                _reply_value(connection, "value", namespace[name])
        else:
            _call(connection, namespace, modules, request)


def new_shell():
    """The IPython shell a submission's cells run in, without history (the zygote makes it before any fork)."""
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.enabled = False
    return InteractiveShell.instance(config=config)


def run_submission(inbound: Connection, outbound: Connection, output: int) -> None:
    """Run the cells the judge sends, then answer its requests until it hangs up."""
    shell = new_shell()  # the zygote's, unused until this fork: making one costs about 50 ms of CPU
    printed = [0]
    sys.stdout, sys.stderr = (CappedOutput(stream, output, printed) for stream in (sys.stdout, sys.stderr))
    _send(outbound, "ready", confinement())
    _run_cells(shell, outbound, pickle.loads(inbound.recv_bytes()))
    _send(outbound, "ran")
    try:
        _serve(shell, inbound, outbound)
    except EOFError:  # the judge is done
        pass


def _fork_submission(request: dict, fds: list[int], server: socket.socket, workdir: str) -> int:
    """Fork one submission's process from the warm zygote; returns its pid (its own session)."""
    pid = os.fork()
    if pid:
        for fd in fds:
            os.close(fd)
        return pid
    code = 1
    try:
        server.close()
        os.setsid()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        inbound, outbound, printed = fds
        os.dup2(printed, 1)
        os.dup2(printed, 2)
        sys.stdout, sys.stderr = (io.TextIOWrapper(os.fdopen(fd, "wb", 0), write_through=True) for fd in (1, 2))
        os.chdir(workdir)
        os.environ.update(request["env"])
        _limit(request["memory"], request["cpu_s"], request["output"], request["processes"])
        run_submission(Connection(inbound), Connection(outbound), request["output"])
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(code)


def _clean(workdir: str, pid: int | None, ended: dict[int, int]) -> None:
    """Kill whatever the last submission left running and empty the working folder. As its namespace's
    PID 1, kill(-1) reaches every other process there (daemons and their children included)."""
    try:
        if os.getpid() == 1:
            os.kill(-1, signal.SIGKILL)
        elif pid is not None:
            os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    while True:  # reap: the killed, and the orphans the namespace gave its PID 1
        try:
            done, status = os.waitpid(-1, 0 if os.getpid() == 1 else os.WNOHANG)
        except ChildProcessError:
            break
        if not done:
            break
        ended[done] = os.waitstatus_to_exitcode(status)
    os.chmod(workdir, 0o700)  # the submission owned it too: it may have locked folders (mode 000)
    for entry in os.scandir(workdir):
        if os.path.ismount(entry.path):
            continue  # what the sandbox bound under its /tmp (code in a temp folder): read-only, kept
        if not entry.is_dir(follow_symlinks=False):
            os.unlink(entry.path)
            continue
        for folder, subfolders, _ in os.walk(entry.path):
            for name in subfolders:
                os.chmod(os.path.join(folder, name), 0o700, follow_symlinks=False)
        shutil.rmtree(entry.path)


def zygote(server_fd: int, workdir: str) -> None:
    """Import torch, IPython and gptlib once, then fork a submission's process for each request of the
    judge. Requests come on a Unix socket: {"fork": ...} with the submission's three pipe ends (it
    answers the pid), {"alive": pid}, {"end": pid, "grace": s} (it waits up to grace seconds for that
    process, then kills everything but itself, and answers its exit status)."""
    torch.set_num_threads(1)
    os.chdir(workdir)
    new_shell()  # every forked submission finds it made, and runs its cells in its own copy
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as PID 1, a signal without a handler cannot reach it
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0)")
    server = socket.socket(fileno=server_fd)
    ended: dict[int, int] = {}
    server.sendall(json.dumps({"ready": confinement()}).encode())
    forked = None  # the last submission's process
    try:
        while True:
            try:
                message, fds, _, _ = socket.recv_fds(server, 65536, 3)
            except OSError:
                return
            if not message:
                return  # the judge closed its end
            request = json.loads(message)
            if "fork" in request:
                _clean(workdir, None, ended)
                forked = _fork_submission(request["fork"], fds, server, workdir)
                reply = {"pid": forked}
            elif "alive" in request:
                _wait(request["alive"], ended, 0)
                reply = {"alive": request["alive"] not in ended}
            else:
                _wait(request["end"], ended, request["grace"])
                _clean(workdir, request["end"], ended)
                reply = {"status": ended.pop(request["end"], None)}
            server.sendall(json.dumps(reply).encode())
    finally:  # however the judge hung up (ended, or killed while a cell ran): the submission ends here
        _clean(workdir, forked, ended)  # (unconfined, its own session would outlive the zygote)


def _wait(pid: int, ended: dict[int, int], seconds: float) -> None:
    """Reap the processes that ended into `ended` (pid: status, negative for a signal), waiting up to
    `seconds` for `pid` to be one of them."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            done, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if done:
            ended[done] = os.waitstatus_to_exitcode(status)
        elif pid in ended or time.monotonic() >= deadline:
            return
        else:
            time.sleep(0.01)


if __name__ == "__main__":
    zygote(int(sys.argv[1]), sys.argv[2])
