"""The sandbox that runs submissions' code, from the host: bubblewrap around a warm zygote, and its client.

Each judge (judge.py) starts one sandbox (`Sandbox`, this module's client of it) with `command(...)`:
Debian's bubblewrap (`bwrap`) in new user, PID, IPC, mount, network, UTS and cgroup namespaces
(`--unshare-all --unshare-user`), with no capability (`--cap-drop ALL`), no new privileges, no nested
user namespace (`--disable-userns`), its own session (`--new-session`) and ended with its judge
(`--die-with-parent`). Its file system is built from nothing: read-only the shared libraries (/usr/lib),
the virtualenv, the Python install and gptlib, whose reference answers (gptlib/exercises/answers/) an
empty tmpfs covers, and of gptlib_course, the grading kit, the package `inside` alone (what runs in the
sandbox: the zygote and the submission's half of a module's mirror, at /kit/gptlib_course/inside): no
other file of the kit is there (an empty tmpfs covers its folder too where it is installed inside the
virtualenv); a private tmpfs of `tmp_bytes` at /tmp, its only writable place, its working folder and
home (where Python or gptlib lives under /tmp, a clone in a temp folder, they are bound read-only at
their place on top of it, in a read-only folder); its own /proc (its own processes only) and a minimal /dev; the root and
/dev read-only. Nothing else of the host exists in it: no /etc, no home, no other student, no test, no
grade. As an ordinary user bwrap runs as that user; as root it first drops to `nobody` (setpriv: no
groups, no capabilities, no new privileges), after an outer bwrap (root, a mount namespace only) has
put the paths above where nobody can reach them: so the submission is never uid 0 on the host, and
reads no root-only file.

Inside, `python -P -m gptlib_course.inside.zygote FD /tmp` is the namespace's first process
(PID 1): inside/zygote.py says what it does. `Sandbox` talks to it over a Unix socket: fork a
submission's process, is it alive, end it.

`command(..., confined=False)` starts the zygote without bwrap (the judge asks for it only when the
instructor passed --unconfined-...): then a submission is limited by rlimits only and runs as the
grading user.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

NOBODY = 65534  # the overflow uid and gid: the user a submission runs as, inside and (graded by root) outside
SYSTEM = ("/usr/lib", "/usr/lib64", "/etc/ld.so.cache")  # the shared libraries Python, torch and numpy load
SANDBOX_TMP = "/tmp"  # the sandbox's writable folder: a private tmpfs, bound paths under it read-only on top
KIT = Path(__file__).resolve().parent  # gptlib_course, the grading kit
INSIDE = KIT / "inside"  # what runs inside the sandbox: of the kit, the one folder a sandbox holds
KIT_AT = "/kit"  # on the sandbox's PYTHONPATH: it holds INSIDE at /kit/gptlib_course/inside
INSIDE_AT = f"{KIT_AT}/{KIT.name}/{INSIDE.name}"
ZYGOTE = f"{KIT.name}.{INSIDE.name}.zygote"  # the module the sandbox's first process runs


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
    answers = _gptlib() / "exercises" / "answers"
    hidden = [answers] if answers.is_dir() else []
    return [str(path) for path in [*hidden, KIT] if any(path.is_relative_to(p) for p in bound)]


def _interpreter() -> str:
    return os.path.join(os.path.realpath(sys.prefix), "bin", "python")


def environment(tmp: str, confined: bool) -> dict[str, str]:
    """The zygote's whole environment (a submission's too), `tmp` its writable folder; on its PYTHONPATH gptlib
    and the inside package (confined: the sandbox's /kit, which holds nothing else of the kit)."""
    python_path = os.pathsep.join([str(_gptlib().parent), KIT_AT if confined else str(KIT.parent)])
    return {"HOME": tmp, "TMPDIR": tmp, "PYTHONPATH": python_path, "PYTHONUTF8": "1", "PYTHONDONTWRITEBYTECODE": "1",
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
    view += ["--ro-bind", sources.get(str(INSIDE), str(INSIDE)), INSIDE_AT]
    for path in hidden_paths(paths):
        view += ["--tmpfs", path, "--remount-ro", path]
    view += [a for top in protected for a in ("--remount-ro", top)]
    return ["bwrap", "--unshare-all", "--unshare-user", "--disable-userns", "--uid", str(NOBODY), "--gid", str(NOBODY),
            "--cap-drop", "ALL", "--die-with-parent", "--new-session", "--as-pid-1", *view,
            "--proc", "/proc", "--dev", "/dev", "--remount-ro", "/", "--remount-ro", "/dev", "--chdir", SANDBOX_TMP,
            "--clearenv", *[a for k, v in environment(SANDBOX_TMP, True).items() for a in ("--setenv", k, v)], "--"]


def _as_nobody(paths: list[str]) -> tuple[list[str], dict[str, str]]:
    """Graded by root: an outer bwrap (root, a new mount namespace only) puts each path at /run/gptlib-N,
    where nobody can reach it (the Python install may live in root's 0700 home), then setpriv drops to
    nobody for good before the inner bwrap starts. Changing the uid clears the parent-death signal the
    outer bwrap set (--die-with-parent): setpriv sets it again, so the sandbox still ends with its judge."""
    sources = {path: f"/run/gptlib-{i}" for i, path in enumerate(paths)}
    outer = ["bwrap", "--dev-bind", "/", "/", "--tmpfs", "/run", "--die-with-parent"]
    for path, source in sources.items():
        outer += ["--ro-bind", path, source]
    drop = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--no-new-privs",
            "--inh-caps=-all", "--bounding-set=-all", "--pdeathsig", "SIGKILL"]  # the uid change cleared the outer's
    return [*outer, "--", *drop], sources


def command(server_fd: int, confined: bool, tmp_bytes: int, workdir: str, read_only: list[str] = ()) -> list[str]:
    """The command line that starts a judge's zygote, listening on `server_fd`; `read_only`: more host
    paths the submissions may read (tests use it)."""
    if not confined:
        return [_interpreter(), "-P", "-m", ZYGOTE, str(server_fd), workdir]
    return [*_confining(tmp_bytes, read_only), _interpreter(), "-P", "-m", ZYGOTE, str(server_fd), SANDBOX_TMP]


def _confining(tmp_bytes: int, read_only: list[str] = ()) -> list[str]:
    """The command line before the program: bwrap, and as root first the outer bwrap and setpriv."""
    paths = [*python_paths(), *read_only]
    prefix, sources = _as_nobody([*paths, str(INSIDE)]) if os.geteuid() == 0 else ([], {})
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


class NotStarted(Exception):
    """The sandbox's zygote did not start: the message says why (bwrap's own error when it has one)."""


class Sandbox:
    """A judge's client of its sandbox: bwrap around a zygote (inside/zygote.py), started on first use, again if it
    ended. `limits`: the judge's Limits (confined, tmp and read_only are the sandbox's)."""

    _current: "Sandbox | None" = None
    start_s = 300.0  # for the zygote's imports, on a loaded machine

    def __init__(self, limits):
        self.key = (limits.confined, limits.tmp, limits.read_only)
        ours, theirs = socket.socketpair()
        self.workdir = None if limits.confined else tempfile.mkdtemp(prefix="gptlib-submission-")
        argv = command(theirs.fileno(), limits.confined, limits.tmp, self.workdir, list(limits.read_only))
        errors = tempfile.TemporaryFile()
        self.process = subprocess.Popen(argv, pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=errors,
                                        stderr=errors, start_new_session=True,
                                        env={**environment(self.workdir or SANDBOX_TMP, limits.confined),
                                             "PATH": os.environ.get("PATH", "/usr/bin:/bin")})
        theirs.close()
        self.socket = ours
        self.socket.settimeout(self.start_s)
        try:
            self.facts = json.loads(self.socket.recv(65536) or b"null")["ready"]
        except (OSError, ValueError, TypeError) as error:
            self.socket.close()
            self.process.kill()
            self.process.wait(timeout=30)
            errors.seek(0)
            why = errors.read().decode(errors="replace").strip()[-500:]
            raise NotStarted(why or str(error)) from None
        finally:
            errors.close()
        self.socket.settimeout(None)

    @classmethod
    def get(cls, limits) -> "Sandbox":
        current = cls._current
        if current is None or current.process.poll() is not None or current.key != (limits.confined, limits.tmp,
                                                                                      limits.read_only):
            if current is not None:
                current.close()
            cls._current = Sandbox(limits)
        return cls._current

    def close(self) -> None:
        """Hang up: the zygote ends (its namespace with it); killed if it has not within 10 s."""
        self.socket.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def _ask(self, request: dict, fds: list[int] = ()) -> dict:
        socket.send_fds(self.socket, [json.dumps(request).encode()], list(fds))
        return json.loads(self.socket.recv(65536))

    def fork(self, request: dict, fds: list[int]) -> int:
        try:
            return self._ask({"fork": request}, fds)["pid"]
        finally:
            for fd in fds:
                os.close(fd)

    def alive(self, pid: int) -> bool:
        return self._ask({"alive": pid})["alive"]

    def end(self, pid: int, grace: float) -> int | None:
        """Wait up to `grace` s for the submission's process to end, then kill everything of it; its status."""
        return self._ask({"end": pid, "grace": grace})["status"]
