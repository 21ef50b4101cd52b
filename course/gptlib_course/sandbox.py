"""The sandbox that runs submissions' code: bubblewrap around a warm zygote.

Each judge (judge.py) starts one sandbox with `command(...)`: Debian's bubblewrap (`bwrap`) in new
user, PID, IPC, mount, network, UTS and cgroup namespaces (`--unshare-all --unshare-user`), with
no capability (`--cap-drop ALL`), no new privileges, no nested user namespace (`--disable-userns`),
its own session (`--new-session`) and ended with its judge (`--die-with-parent`). Its file system
is built from nothing: read-only the shared libraries (/usr/lib), the virtualenv, the Python install
and gptlib, whose reference answers (gptlib/exercises/answers/) an empty tmpfs covers, this file
(the zygote's program, at /zygote.py) and remote_module.py (at /remote_module.py, the submission's half
of a module's mirror): no other file of gptlib_course, the grading kit, is there (an
empty tmpfs covers it too where it is installed inside the virtualenv); a private
tmpfs of `tmp_bytes` at /tmp, its only writable place, its working folder and home (where Python or
gptlib lives under /tmp, a clone in a temp folder, they are bound read-only at their place on top of it,
in a read-only folder); its own /proc (its own processes only) and a minimal /dev; the root and /dev read-only.
Nothing else of the host exists in it: no /etc, no home, no other student, no test, no grade. As an
ordinary user bwrap runs as that user; as root it first drops to `nobody` (setpriv: no groups, no
capabilities, no new privileges), after an outer bwrap (root, a mount namespace only) has put the
paths above where nobody can reach them: so the submission is never uid 0 on the host, and reads no root-only file.

Inside, `python /zygote.py FD /tmp` (this file) is the namespace's first process (PID 1): a zygote
that imports torch, IPython and gptlib and makes an IPython shell once, never reads a test, and forks one
process per submission on the judge's request (starting a submission costs a fork, not seconds of imports).
Before each fork it kills every other process of its namespace (kill(-1): whatever the last
submission left running, daemons included) and empties /tmp (but what is bound there), so no two submissions ever run in
the same namespaces at once and none inherits another's files. It makes itself non-dumpable
(prctl) so that a submission, running as the same user, cannot attach to it or read its memory;
and as PID 1 it ignores every signal it has no handler for. Each forked process starts its own
session and sets its limits (resource.setrlimit): address space, CPU seconds, processes (a fork
bomb stops there: it runs as a user that is not root in its namespace, so the limit binds), the
size of any file it writes, no core files. Its stdout and stderr are a pipe the judge reads and
cuts at the output limit.

Then it runs the cells the judge sends (in an IPython shell, so magics and display() work), and
answers the judge's requests through the pipe: what a name is, and calls of the submission's
functions with the arguments the judge's checker chose. Everything it sends back is plain data
(numbers, strings, tensors, lists), read by the judge as untrusted bytes, at most REPLY_BYTES a reply.
A call that returns an nn.Module (a class of notebook 09's build track, called with the checker's
sizes) keeps it here and describes it; the judge's checker works on a mirror of it, whose forward
runs here (remote_module.py: its protocol).

`command(..., confined=False)` starts the zygote without bwrap (the judge asks for it only when the
instructor passed --unconfined-...): then a submission is limited by rlimits only and runs as the
grading user.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import io
import json
import math
import numbers
import os
import pickle
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time
import traceback
from multiprocessing.connection import Connection
from pathlib import Path

NOBODY = 65534  # the overflow uid and gid: the user a submission runs as, inside and (graded by root) outside
SYSTEM = ("/usr/lib", "/usr/lib64", "/etc/ld.so.cache")  # the shared libraries Python, torch and numpy load
REPLY_BYTES = 32 * 2**20  # a larger reply is refused here, named (the judge reads none over 64 MiB)
SANDBOX_TMP = "/tmp"  # the sandbox's writable folder: a private tmpfs, bound paths under it read-only on top
PROGRAM = os.path.realpath(__file__)  # the zygote's program: this file, one of the two of gptlib_course a sandbox holds
ZYGOTE = "/zygote.py"  # where the sandbox holds it
MIRROR = str(Path(PROGRAM).with_name("remote_module.py"))  # the other: the submission's half of a module's mirror
MIRROR_AT = "/remote_module.py"  # where the sandbox holds it: beside the zygote, which loads it by path
PR_SET_DUMPABLE = 4


def _gptlib() -> Path:
    """The gptlib being graded with: the judge's own."""
    import gptlib

    return Path(gptlib.__file__).resolve().parent


def python_paths() -> list[str]:
    """What a submission's interpreter needs besides the system's libraries: the virtualenv, the Python
    install it was made from, and the gptlib being graded with (real paths, links resolved)."""
    paths = [os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix), str(_gptlib())]
    return list(dict.fromkeys(paths))


def hidden_paths(bound: list[str]) -> list[str]:
    """Folders of the `bound` paths that a submission must not read, each covered by an empty read-only
    tmpfs: gptlib's reference answers (gptlib/exercises/answers/, which the class never gets), and the
    grading kit (gptlib_course) where a bound folder holds it (installed into the virtualenv, not editable)."""
    answers, kit = _gptlib() / "exercises" / "answers", Path(PROGRAM).parent
    hidden = [answers] if answers.is_dir() else []
    return [str(path) for path in [*hidden, kit] if any(path.is_relative_to(p) for p in bound)]


def _interpreter() -> str:
    return os.path.join(os.path.realpath(sys.prefix), "bin", "python")


def environment(tmp: str) -> dict[str, str]:
    """The zygote's whole environment (a submission's too), `tmp` its writable folder."""
    gptlib_parent = str(_gptlib().parent)
    return {"HOME": tmp, "TMPDIR": tmp, "PYTHONPATH": gptlib_parent, "PYTHONUTF8": "1", "PYTHONDONTWRITEBYTECODE": "1",
            "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg", "MPLCONFIGDIR": f"{tmp}/.matplotlib",
            "IPYTHONDIR": f"{tmp}/.ipython", "PATH": os.path.join(os.path.realpath(sys.prefix), "bin")}


def _protected_in_tmp(paths: list[str]) -> list[str]:
    """The folders right under SANDBOX_TMP that hold a bound path without being one (a clone in a temp
    folder: /tmp/clone for /tmp/clone/gptlib): each is an empty tmpfs, read-only once the paths are
    bound in it, so a submission can neither write beside the code nor move or remove a folder above it
    (a bound path itself is a mount point: it cannot be moved either)."""
    tops = [str(Path(SANDBOX_TMP, Path(p).relative_to(SANDBOX_TMP).parts[0]))
            for p in paths if Path(p).is_relative_to(SANDBOX_TMP)]
    return [top for top in dict.fromkeys(tops) if top not in paths]


def _bwrap(paths: list[str], sources: dict[str, str], tmp_bytes: int) -> list[str]:
    """The bwrap that makes the namespaces; `sources`: where each path is found (the outer view's stand-in).
    The submission's /tmp comes first, then the bound paths, outer before inner: a path under /tmp lands
    at its place on top of the writable tmpfs (later mounts win)."""
    if any(Path(SANDBOX_TMP).is_relative_to(p) for p in paths):
        raise ValueError(f"{SANDBOX_TMP} is the sandbox's writable folder: Python or gptlib cannot live at or above it")
    protected = _protected_in_tmp(paths)
    view = ["--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
            "--size", str(tmp_bytes), "--perms", "1777", "--tmpfs", SANDBOX_TMP]
    view += [a for top in protected for a in ("--tmpfs", top)]
    for path in [*SYSTEM, *sorted(paths, key=lambda p: len(Path(p).parts))]:
        view += ["--ro-bind-try" if path in SYSTEM else "--ro-bind", sources.get(path, path), path]
    view += ["--ro-bind", sources.get(PROGRAM, PROGRAM), ZYGOTE, "--ro-bind", sources.get(MIRROR, MIRROR), MIRROR_AT]
    for path in hidden_paths(paths):
        view += ["--tmpfs", path, "--remount-ro", path]
    view += [a for top in protected for a in ("--remount-ro", top)]
    return ["bwrap", "--unshare-all", "--unshare-user", "--disable-userns", "--uid", str(NOBODY), "--gid", str(NOBODY),
            "--cap-drop", "ALL", "--die-with-parent", "--new-session", "--as-pid-1", *view,
            "--proc", "/proc", "--dev", "/dev", "--remount-ro", "/", "--remount-ro", "/dev", "--chdir", SANDBOX_TMP,
            "--clearenv", *[a for k, v in environment(SANDBOX_TMP).items() for a in ("--setenv", k, v)], "--"]


def _as_nobody(paths: list[str]) -> tuple[list[str], dict[str, str]]:
    """Graded by root: an outer bwrap (root, a new mount namespace only) puts each path at /run/gptlib-N,
    where nobody can reach it (the Python install may live in root's 0700 home), then setpriv drops to
    nobody for good before the inner bwrap starts."""
    sources = {path: f"/run/gptlib-{i}" for i, path in enumerate(paths)}
    outer = ["bwrap", "--dev-bind", "/", "/", "--tmpfs", "/run", "--die-with-parent"]
    for path, source in sources.items():
        outer += ["--ro-bind", path, source]
    drop = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--no-new-privs",
            "--inh-caps=-all", "--bounding-set=-all"]
    return [*outer, "--", *drop], sources


def command(server_fd: int, confined: bool, tmp_bytes: int, workdir: str, read_only: list[str] = ()) -> list[str]:
    """The command line that starts a judge's zygote, listening on `server_fd`; `read_only`: more host
    paths the submissions may read (tests use it)."""
    if not confined:
        return [_interpreter(), PROGRAM, str(server_fd), workdir]
    return [*_confining(tmp_bytes, read_only), _interpreter(), ZYGOTE, str(server_fd), SANDBOX_TMP]


def _confining(tmp_bytes: int, read_only: list[str] = ()) -> list[str]:
    """The command line before the program: bwrap, and as root first the outer bwrap and setpriv."""
    paths = [*python_paths(), *read_only]
    prefix, sources = _as_nobody([*paths, PROGRAM, MIRROR]) if os.geteuid() == 0 else ([], {})
    return [*prefix, *_bwrap(paths, sources, tmp_bytes)]


def confinement_problem(timeout: float = 60.0) -> str | None:
    """Why this machine cannot confine a submission (None: it can): bwrap missing, or unable to make its
    namespaces here (user namespaces disabled, no setpriv, ...)."""
    if shutil.which("bwrap") is None:
        return "bubblewrap (bwrap) is not installed: `make system-packages` or `apt-get install bubblewrap`"
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        return "setpriv (util-linux) is not installed: grading as root needs it to drop to nobody"
    probe = [*_confining(2**20), _interpreter(), "-c", "import os; assert os.getuid() != 0"]
    try:
        done = subprocess.run(probe, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"bwrap did not start a Python within {timeout:g} s"
    if done.returncode != 0:
        return f"bwrap could not make a sandbox here: {done.stderr.decode(errors='replace').strip()[-300:]}"
    return None


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


def _plain(value, depth: int = 0):
    """value as plain data the judge reads: each builtin as its exact type, read through the builtin's
    own methods so that an override cannot lie (an int subclass or IntEnum becomes its int, a
    namedtuple its tuple), numpy arrays as tensors, numpy numbers as Python ones, other numbers
    (Fraction, Decimal) as the built-in one the checkers read; anything else raises."""
    import numpy as np
    import torch

    kind = type(value)  # not value.__class__, which an object may fake
    if depth > 32:
        raise TypeError("nested more than 32 deep")
    if value is None or kind is bool:
        return value
    for base in (int, float, complex, str):
        if issubclass(kind, base):
            return getattr(base, f"__{base.__name__}__")(value)
    if issubclass(kind, (tuple, list)):
        base = tuple if issubclass(kind, tuple) else list
        return base(_plain(v, depth + 1) for v in base.__iter__(value))
    if issubclass(kind, dict):
        return {_plain(k, depth + 1): _plain(v, depth + 1) for k, v in dict.items(value)}
    if issubclass(kind, torch.Tensor):
        return torch.Tensor.detach(value).as_subclass(torch.Tensor).clone()
    if issubclass(kind, np.ndarray):
        return torch.from_numpy(np.array(value, copy=True))
    if issubclass(kind, np.generic):
        return _plain(value.item(), depth + 1)
    if isinstance(value, numbers.Number):  # a Fraction, a Decimal: as the built-in number it equals
        return _plain(_number(value), depth + 1)
    raise TypeError(kind.__name__)


def _number(value: numbers.Number):
    """A number of no built-in type (Fraction, Decimal) as the built-in one the
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


def _reply_value(connection: Connection, kind: str, value, *tail) -> None:
    """(kind, value as plain data, *tail), or ("unsendable", what value is, *tail); tail: plain already."""
    import torch

    what = type(value).__name__[:60]
    buffer = io.BytesIO()
    try:
        torch.save((kind, _plain(value), *tail), buffer)
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


@functools.cache
def remote_modules():
    """remote_module.py, this file's neighbour (this file runs as a program, with no package to import from)."""
    spec = importlib.util.spec_from_file_location("gptlib_remote_module", Path(__file__).with_name("remote_module.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _call(connection: Connection, namespace: dict, modules, request: tuple) -> None:
    """Run ("call", name, args, state) or ("forward", (handle, node), args, state) under the checker's global
    state (remote_module.py); reply with its outcome and the changes to the parameters of the modules involved."""
    import torch
    from torch import nn

    from gptlib.exercises.result import global_state_kept, raised_by_a_stub  # the checkers' own rules

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
    modules = remote_modules().ModuleServer()
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
        ended[done] = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
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
    import numpy  # noqa: F401  (imported here so that every forked submission finds them loaded)
    import torch

    import gptlib.exercises  # noqa: F401

    remote_modules()

    torch.set_num_threads(1)
    os.chdir(workdir)
    new_shell()  # every forked submission finds it made, and runs its cells in its own copy
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as PID 1, a signal without a handler cannot reach it
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0)")
    server = socket.socket(fileno=server_fd)
    ended: dict[int, int] = {}
    server.sendall(json.dumps({"ready": confinement()}).encode())
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
            reply = {"pid": _fork_submission(request["fork"], fds, server, workdir)}
        elif "alive" in request:
            _wait(request["alive"], ended, 0)
            reply = {"alive": request["alive"] not in ended}
        else:
            _wait(request["end"], ended, request["grace"])
            _clean(workdir, request["end"], ended)
            reply = {"status": ended.pop(request["end"], None)}
        server.sendall(json.dumps(reply).encode())


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
            ended[done] = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        elif pid in ended or time.monotonic() >= deadline:
            return
        else:
            time.sleep(0.01)


if __name__ == "__main__":
    del sys.path[0]  # run as a file: its own folder is not a place to import from
    zygote(int(sys.argv[1]), sys.argv[2])
