"""The trusted half of grading one notebook: gptlib's checkers run here, the submission's code never does.

`grade_notebook(path, tests, limits, hide)` starts the submission in a confined process
(sandbox.py) in a temporary folder of its own, sends it the cells to run (questions.cells_to_run),
then runs every case of every test file with `run(check, seed_offset)`: the check's names are
looked up in the submission, a function becomes a `RemoteFunction` that forwards each call the
checker makes through the pipe, a value comes back as plain data. So the checker, its
references and the hidden seed offsets stay in this process; the submission cannot read them or
patch them. When a call runs out of time or the process dies, that case scores zero with the
reason, and the next question starts a fresh process.
"""

from __future__ import annotations

import ast
import io
import json
import os
import pickle
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path

import torch

from . import sandbox
from .cases import TestFile
from .questions import cells_to_run
from .variants import shifted_seeds


@dataclass(frozen=True)
class Limits:
    cells_s: float = 120.0  # wall-clock seconds for running the notebook's cells
    call_s: float = 60.0  # wall-clock seconds for one call of the submission's function by a checker
    memory: int = 3 * 2**30  # address space of the submission's process (bytes): torch alone maps ~0.7 GB
    output: int = 2**20  # bytes the submission may print or write to any file
    cpu_s: int = 600  # CPU seconds of the submission's process, over its whole life


@dataclass(frozen=True)
class CaseOutcome:
    question: str
    hidden: bool
    points: float
    earned: float
    status: str  # the checker's status ("passed", "failed", ...) or "error" for what stopped it
    message: str
    details: tuple[str, ...] = ()


@dataclass
class NotebookGrade:
    notebook: str
    outcomes: list[CaseOutcome] = field(default_factory=list)
    cell_errors: list[str] = field(default_factory=list)  # "cell 7: ModuleNotFoundError: ..."
    confinement: dict = field(default_factory=dict)


class SubmissionStopped(Exception):
    """The submission's process ran out of time, or ended: the message says which, for the feedback."""


class Submission:
    """The submission's confined process: started on first use, again after it died."""

    def __init__(self, cells: list[tuple[int, str]], limits: Limits, hide: list[str]):
        self.cells, self.limits, self.hide = cells, limits, hide
        self.process = None  # True while the submission's process runs (self.pid, forked by the zygote)
        self.broken: str | None = None  # why running the cells failed: every later case fails at once with it
        self.cell_errors: list[str] = []
        self.confinement: dict = {}
        self.folder = Path(tempfile.mkdtemp(prefix="gptlib-submission-"))
        os.chmod(self.folder, 0o700)
        self.output = b""  # the first bytes the submission printed (the rest is read and dropped)

    def _receive(self, seconds: float, doing: str):
        if not self.inbound.poll(seconds):
            self.stop()
            raise SubmissionStopped(f"took longer than {seconds:g} s {doing} (the grader's time limit)")
        try:
            data = self.inbound.recv_bytes(maxlength=64 * 2**20)
        except (EOFError, OSError):
            code = self.stop(grace=5)
            raise SubmissionStopped(f"your notebook's process ended {doing} ({_how_it_ended(code)})") from None
        return torch.load(io.BytesIO(data), weights_only=True)

    def start(self) -> None:
        if self.broken:
            raise SubmissionStopped(self.broken)
        try:
            self._start()
        except SubmissionStopped as gone:
            self.broken = str(gone)
            raise

    def _start(self) -> None:
        child_reads, judge_writes = os.pipe()
        judge_reads, child_writes = os.pipe()
        printed_read, printed_write = os.pipe()
        limits = self.limits
        env = {"HOME": str(self.folder), "TMPDIR": str(self.folder), "MPLBACKEND": "Agg",
               "IPYTHONDIR": str(self.folder / ".ipython")}
        request = {"folder": str(self.folder), "env": env, "hide": self.hide, "memory": limits.memory,
                   "cpu_s": limits.cpu_s, "output": limits.output}
        self.pid = Zygote.get().fork(request, [child_reads, child_writes, printed_write])
        self.process = True
        self.outbound, self.inbound = Connection(judge_writes), Connection(judge_reads)
        threading.Thread(target=self._drain, args=(os.fdopen(printed_read, "rb"),), daemon=True).start()
        _, self.confinement = self._receive(self.limits.cells_s, "while starting")
        if "failed" in self.confinement:
            raise SubmissionStopped(f"the grader could not confine your notebook ({self.confinement['failed']}): "
                                    "tell your instructor")
        self._send(self.cells, "while starting")
        self.cell_errors = []
        deadline = time.monotonic() + self.limits.cells_s
        running = "while starting"
        while True:
            message = self._receive(max(0.0, deadline - time.monotonic()), running)
            if message[0] == "cell":
                running = f"while running cell {message[1]}"
            elif message[0] == "cell_done" and message[2] is not None:
                self.cell_errors.append(f"cell {message[1]}: {message[2]}")
            elif message[0] == "ran":
                return

    def _drain(self, stream) -> None:
        """Read everything the submission prints, keeping the first bytes: printing megabytes costs it
        time, never the judge's memory, and never blocks it on a full pipe."""
        for chunk in iter(lambda: stream.read1(65536), b""):
            if len(self.output) < self.limits.output:
                self.output += chunk[: self.limits.output - len(self.output)]

    def ask(self, *request, seconds: float, doing: str):
        if self.process is None:
            self.start()
        self._send(request, doing)
        return self._receive(seconds, doing)

    def _send(self, message, doing: str) -> None:
        try:
            self.outbound.send_bytes(pickle.dumps(message))
        except OSError:  # the process has ended
            code = self.stop(grace=5)
            raise SubmissionStopped(f"your notebook's process ended {doing} ({_how_it_ended(code)})") from None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)

    def stop(self, grace: float = 0) -> int | None:
        """End the process and everything it started (after `grace` seconds to end by itself); its exit
        status (negative: the signal that ended it)."""
        if self.process is None:
            return None
        self.process = None
        for connection in (self.outbound, self.inbound):
            connection.close()
        if not grace:
            _kill_group(self.pid)
        status = Zygote.get().status(self.pid, grace or 5.0)
        if status is None:  # still running after the grace period
            _kill_group(self.pid)
            status = Zygote.get().status(self.pid, 5.0)
        return status


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, 9)
    except ProcessLookupError:
        pass


class Zygote:
    """This judge's zygote (sandbox.py): started on first use, again if it died."""

    _current: "Zygote | None" = None

    def __init__(self):
        ours, theirs = socket.socketpair()
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg",
               **({"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {})}
        self.process = subprocess.Popen([sys.executable, sandbox.__file__, str(theirs.fileno())], pass_fds=(theirs.fileno(),),
                                        stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        theirs.close()
        self.socket = ours

    @classmethod
    def get(cls) -> "Zygote":
        if cls._current is None or cls._current.process.poll() is not None:
            cls._current = Zygote()
        return cls._current

    def _ask(self, request: dict, fds: list[int] = ()) -> dict:
        socket.send_fds(self.socket, [json.dumps(request).encode()], list(fds))
        return json.loads(self.socket.recv(65536))

    def fork(self, request: dict, fds: list[int]) -> int:
        try:
            return self._ask(request, fds)["pid"]
        finally:
            for fd in fds:
                os.close(fd)

    def status(self, pid: int, seconds: float) -> int | None:
        return self._ask({"status": pid, "seconds": seconds})["status"]


def _how_it_ended(code: int | None) -> str:
    if code is not None and code < 0:
        names = {6: "aborted, often memory exhausted", 9: "killed", 11: "crashed: segmentation fault",
                 24: "over the CPU-time limit"}
        return names.get(-code, f"ended by signal {-code}")
    return f"exit code {code}"


class RemoteFunction:
    """The submission's function as the checker sees it: each call runs in the submission's process."""

    def __init__(self, submission: Submission, name: str, display_name: str, seconds: float):
        self.submission, self.name, self.__name__, self.seconds = submission, name, display_name, seconds

    def __call__(self, *args):
        reply = self.submission.ask("call", self.name, args, seconds=self.seconds, doing=f"in {self.__name__}(...)")
        if reply[0] == "return":
            return reply[1]
        if reply[0] == "unsendable":
            raise TypeError(f"returned a {reply[1]}, which the grader cannot read back "
                            "(return numbers, strings, tensors or arrays)")
        _, kind, message, stub = reply
        if stub:  # raised from a file that is no library's, on a `raise` line: the checker reads "not attempted yet"
            exec(compile("raise NotImplementedError(message)", "<submission>", "exec"), {"message": message})
        raise type(kind, (Exception,), {})(message)


def _answer_names(check: str) -> list[str]:
    call = ast.parse(check, mode="eval").body
    arguments = [*call.args, *(k.value for k in call.keywords)]
    return [a.id for a in arguments if isinstance(a, ast.Name)]


def _looked_up(submission: Submission, name: str):
    reply = submission.ask("get", name, seconds=submission.limits.call_s, doing=f"while reading {name}")
    if reply[0] == "function":
        return RemoteFunction(submission, name, reply[1], submission.limits.call_s)
    if reply[0] == "value":
        return reply[1]
    if reply[0] == "unsendable":
        raise SubmissionStopped(f"{name} is a {reply[1]}, which the grader cannot read back")
    errors = "; ".join(submission.cell_errors[-2:])
    raise SubmissionStopped(f"{name} is not defined in your notebook" +
                         (f" (a cell failed: {errors})" if errors else " (was the cell that defines it deleted or renamed?)"))


HIDDEN_MESSAGES = {  # what a hidden case says when it was judged: the checker's words could carry its inputs (a student's
    # own exception text too). The grader's own reasons (a time limit, a process that ended, a name not defined) and
    # a stub's "not attempted yet" name no input and are shown as they are.
    "passed": "passed on inputs the public test does not show.",
    "failed": "wrong on inputs the public test does not show: an answer that fits the public points only (a table, "
              "a constant) fails here; the public test names the mistakes it recognises.",
    "error": "your code raised an error, or returned what the checker could not use, on inputs the public test "
             "does not show (their values and the error's text are not shown).",
}


def run_case(submission: Submission, test: TestFile, case) -> CaseOutcome:
    """One case of a test file, judged here; anything the submission does wrong is a zero with its reason.
    A hidden case reports its verdict in fixed words (HIDDEN_MESSAGES), never its checker's message or details."""
    from gptlib import exercises
    from gptlib.exercises.result import FAILED, Result

    safe = []  # messages of the grader's own, which say nothing of the hidden inputs

    def guarded(remote: RemoteFunction):
        """remote, noting the grader's own reason when a call stops the submission (the checker reports it as an error)."""
        def call(*args):
            try:
                return remote(*args)
            except SubmissionStopped as gone:
                safe.append(str(gone))
                raise

        call.__name__ = remote.__name__
        return call

    def run(check: str, seed_offset: int = 0, functions: tuple[str, ...] = ()):
        answers = {name: _looked_up(submission, name) for name in _answer_names(check)}
        values = [name for name in functions if not isinstance(answers[name], RemoteFunction)]
        if values:
            safe.append(f"{values[0]} is a value, not a function: the hidden case asks at other points than the "
                        f"public one, so write {values[0]} as a function of its arguments.")
            return Result(test.name, FAILED, safe[-1])
        namespace = {"exercises": exercises,
                     **{name: guarded(a) if isinstance(a, RemoteFunction) else a for name, a in answers.items()}}
        with shifted_seeds(seed_offset):
            return eval(check, namespace)

    try:
        result = case(run)
    except SubmissionStopped as gone:
        return CaseOutcome(test.name, case.hidden, case.points, 0, "error", _redacted(str(gone)) if case.hidden else str(gone))
    earned = case.points if result else 0
    if case.hidden:
        message = _redacted(safe[-1]) if safe else HIDDEN_MESSAGES.get(result.status, result.message)
        return CaseOutcome(test.name, True, case.points, earned, result.status, message)
    return CaseOutcome(test.name, False, case.points, earned, result.status, result.message, tuple(result.details))


def _redacted(reason: str) -> str:
    """The grader's reason for a hidden case, without an exit code or signal number the student's code could choose."""
    return re.sub(r"exit code -?\d+|ended by signal \d+", "an exit status not shown for a hidden case", reason)


def grade_notebook(path: Path, tests: list[TestFile], limits: Limits, hide: list[str]) -> NotebookGrade:
    grade = NotebookGrade(path.stem)
    try:
        notebook = json.loads(path.read_text(encoding="utf-8"))
        cells = cells_to_run(notebook)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        reason = f"not a readable notebook: {type(error).__name__}: {str(error)[:200]}"
        grade.outcomes = [CaseOutcome(t.name, c.hidden, c.points, 0, "error", reason) for t in tests for c in t.cases]
        return grade
    submission = Submission(cells, limits, hide)
    try:
        for test in tests:
            for case in test.cases:
                grade.outcomes.append(run_case(submission, test, case))
            grade.cell_errors = grade.cell_errors or submission.cell_errors
        grade.confinement = submission.confinement
    finally:
        submission.close()
    return grade
