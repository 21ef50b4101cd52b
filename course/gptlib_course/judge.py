"""The trusted half of grading one notebook: gptlib's checkers run here, the submission's code never does.

`grade_notebook(path, tests, limits)` reads the notebook as untrusted (read_notebook: a regular file,
never a link, FIFO or device), starts the submission in a process forked in this judge's sandbox
(sandbox.py: bwrap around a warm zygote, inside/zygote.py), sends it the cells to run (questions.cells_to_run),
then runs every case of every test file with `run(check, seed_offset)`: the check's names are
looked up in the submission, a function becomes a `RemoteFunction` that forwards each call the
checker makes through the pipe, a module such a call returns (a build-track class of notebook 09,
called with the checker's sizes) a mirror whose forward runs there (remote_module.py), a value comes
back as plain data, and every reply is read as
untrusted bytes (read_reply): what the judge cannot read is that case's zero with the reason, never
an exception in the judge. So the checker, its
references and the hidden seed offsets stay in this process; the submission cannot read them or
patch them. When a call runs out of time or the process dies, that case scores zero with the
reason, and the next question starts a fresh process.
"""

from __future__ import annotations

import ast
import errno
import io
import json
import os
import pickle
import re
import stat
import threading
import time
import zipfile
from multiprocessing.connection import Connection
from pathlib import Path

import torch

from gptlib.assignment.cases import TestFile
from gptlib.checking import shifted_seeds

from . import remote_module
from .limits import Limits
from .questions import cells_to_run
from .results import CaseOutcome, NotebookGrade
from .sandbox import NotStarted, Sandbox

ERROR_TEXT = 4000  # characters of cell errors a notebook's feedback shows, in all
NOTEBOOK_BYTES = 16 * 2**20  # a larger .ipynb is not read


class SubmissionStopped(Exception):
    """The submission's process ran out of time, ended, or sent what the judge cannot read: the message
    says which, for the feedback."""


class Submission:
    """The submission's process, forked in this judge's sandbox: started on first use, again after it died."""

    def __init__(self, cells: list[tuple[int, str]], limits: Limits):
        self.cells, self.limits = cells, limits
        self.process = None  # True while the submission's process runs (self.pid, in the sandbox's namespace)
        self.broken: str | None = None  # why running the cells failed: every later case fails at once with it
        self.cell_errors: list[str] = []
        self.confinement: dict = {}
        self.output = b""  # the first bytes the submission printed (the rest is read and dropped)
        self.modules: remote_module.Link | None = None  # the mirrors of this process's modules (a new Link per process)
        self.stops: list[str] = []  # why the submission was stopped, each time: the grader's own reasons

    def stopped(self, reason: str) -> SubmissionStopped:
        """SubmissionStopped(reason), its reason noted in self.stops (a hidden case may show it: it names no input)."""
        self.stops.append(reason)
        return SubmissionStopped(reason)

    def _receive(self, seconds: float, doing: str):
        """The next message, within `seconds`. A process that ended while something it started holds its
        pipe open (a daemon) is seen ended within a second, not at the time limit."""
        deadline = time.monotonic() + seconds
        while not self.inbound.poll(min(1.0, max(0.0, deadline - time.monotonic()))):
            if time.monotonic() >= deadline:
                self.stop()
                raise SubmissionStopped(f"took longer than {seconds:g} s {doing} (the grader's time limit)")
            if not self.sandbox.alive(self.pid):
                code = self.stop()
                raise SubmissionStopped(f"your notebook's process ended {doing} ({_how_it_ended(code)})")
        try:
            data = self.inbound.recv_bytes(maxlength=64 * 2**20)
        except (EOFError, OSError):
            code = self.stop(grace=5)
            raise SubmissionStopped(f"your notebook's process ended {doing} ({_how_it_ended(code)})") from None
        return read_reply(data, doing)

    def start(self) -> None:
        if self.broken:
            raise SubmissionStopped(self.broken)
        try:
            self._start()
        except SubmissionStopped as gone:
            self.broken = str(gone)
            raise self.stopped(str(gone)) from None

    def _start(self) -> None:
        limits = self.limits
        request = {"env": {}, "memory": limits.memory, "cpu_s": limits.cpu_s, "output": limits.output,
                   "processes": limits.processes}
        try:
            self.sandbox = Sandbox.get(limits)
        except NotStarted as why:
            raise SubmissionStopped(f"the grader could not start its sandbox ({why}): tell your instructor") from None
        child_reads, judge_writes = os.pipe()
        judge_reads, child_writes = os.pipe()
        printed_read, printed_write = os.pipe()
        try:
            self.pid = self.sandbox.fork(request, [child_reads, child_writes, printed_write])  # closes the child's ends
        except BaseException:
            for fd in (judge_writes, judge_reads, printed_read):
                os.close(fd)
            raise
        self.process = True
        self.modules = remote_module.Link(self._forward)
        self.outbound, self.inbound = Connection(judge_writes), Connection(judge_reads)
        threading.Thread(target=self._drain, args=(os.fdopen(printed_read, "rb"),), daemon=True).start()
        ready = self._receive(self.limits.cells_s, "while starting")
        self.confinement = ready[1] if len(ready) == 2 and isinstance(ready[1], dict) else {}
        self._send(self.cells, "while starting")
        self.cell_errors = []
        deadline = time.monotonic() + self.limits.cells_s
        running = "while starting"
        while True:
            message = self._receive(max(0.0, deadline - time.monotonic()), running)
            if message[:1] == ("cell",) and len(message) == 2 and isinstance(message[1], int):
                running = f"while running cell {message[1]}"
            elif message[:1] == ("cell_done",) and len(message) == 3 and isinstance(message[2], str):
                self._cell_error(f"cell {message[1]}: {message[2]}")
            elif message == ("ran",):
                return

    def _cell_error(self, text: str) -> None:
        """Keep a cell's error, ERROR_TEXT characters in all: the feedback cannot carry more than that."""
        room = ERROR_TEXT - sum(len(e) for e in self.cell_errors)
        if room > 0:
            self.cell_errors.append(text[:room] + ("..." if len(text) > room else ""))

    def _drain(self, stream) -> None:
        """Read everything the submission prints, keeping the first bytes: printing megabytes costs it
        time, never the judge's memory, and never blocks it on a full pipe."""
        for chunk in iter(lambda: stream.read1(65536), b""):
            if len(self.output) < self.limits.output:
                self.output += chunk[: self.limits.output - len(self.output)]

    def ask(self, *request, seconds: float, doing: str):
        if self.process is None:
            self.start()
        try:
            self._send(request, doing)
            return self._receive(seconds, doing)
        except SubmissionStopped as gone:
            raise self.stopped(str(gone)) from None

    def _forward(self, link: remote_module.Link, kind: str, target, args: tuple):
        return remote_call(self, link, kind, target, args, self.limits.call_s, "in your module's forward")

    def _send(self, message, doing: str) -> None:
        try:
            self.outbound.send_bytes(pickle.dumps(message))
        except OSError:  # the process has ended
            code = self.stop(grace=5)
            raise SubmissionStopped(f"your notebook's process ended {doing} ({_how_it_ended(code)})") from None

    def close(self) -> None:
        self.stop()

    def stop(self, grace: float = 0) -> int | None:
        """End the process and everything it started (after `grace` seconds to end by itself); its exit
        status (negative: the signal that ended it)."""
        if self.process is None:
            return None
        self.process = None
        for connection in (self.outbound, self.inbound):
            connection.close()
        return self.sandbox.end(self.pid, grace)


def read_reply(data: bytes, doing: str) -> tuple:
    """A message of the submission's process, read as untrusted bytes: plain data in a tuple whose first
    item names it, or SubmissionStopped (that question's zero, with the reason)."""
    try:
        message = torch.load(io.BytesIO(data), weights_only=True)
    except Exception as error:
        raise SubmissionStopped(f"your notebook sent {doing} something the grader cannot read "
                                f"({type(error).__name__})") from None
    if not (type(message) is tuple and message and type(message[0]) is str):
        raise SubmissionStopped(f"your notebook sent {doing} something the grader cannot read (not a reply)")
    return message


def _how_it_ended(code: int | None) -> str:
    """A submission's exit status (negative: the signal that ended it) in a student's words. Deliberately not
    tests/support/kernel_watchdog.how_it_ended, which names any signal for a developer ("SIGILL (4)"): these
    words are the feedback's, and _redacted hides their numbers from a hidden case."""
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
        if self.submission.process is None:  # stopped by an earlier call: the cells run again first
            self.submission.start()
        return remote_call(self.submission, self.submission.modules, "call", self.name, args, self.seconds,
                           f"in {self.__name__}(...)")


def remote_call(submission: Submission, link: remote_module.Link, kind: str, target, args: tuple, seconds: float,
                doing: str):
    """A call of the submission's function (kind "call", target its name) or of a module's forward ("forward",
    target (handle, node)) through `link`, the process's remote_module.Link: its value (an nn.Module as a mirror),
    or the submission's own exception raised here (a stub's NotImplementedError as one)."""
    if link is None or link is not submission.modules or submission.process is None:
        raise submission.stopped("the process that built your module has ended (an earlier call stopped it)")
    try:
        request, handles = link.request(kind, target, args)
    except ProcessLookupError as error:
        raise submission.stopped(str(error)) from None
    reply = submission.ask(*request, seconds=seconds, doing=doing)
    try:
        reply = link.received(reply, handles)
    except ValueError as error:
        raise submission.stopped(f"your notebook sent {doing} something the grader cannot read ({error})") from None
    if reply[0] == "return" and len(reply) == 2:
        return reply[1]
    if reply[0] == "unsendable" and len(reply) == 2:
        raise TypeError(f"returned a {reply[1]}, which the grader cannot read back "
                        "(return numbers, strings, tensors or arrays)")
    if not (reply[0] == "raise" and len(reply) == 4 and all(type(v) is str for v in reply[1:3])):
        raise submission.stopped(f"your notebook sent an unexpected reply {doing}")
    _, kind, message, stub = reply
    if stub is True:  # raised from a file that is no library's, on a `raise` line: the checker reads "not attempted yet"
        exec(compile("raise NotImplementedError(message)", "<submission>", "exec"), {"message": message})
    raise type(kind, (Exception,), {})(message)


def _answer_names(check: str) -> list[str]:
    call = ast.parse(check, mode="eval").body
    arguments = [*call.args, *(k.value for k in call.keywords)]
    return [a.id for a in arguments if isinstance(a, ast.Name)]


def _looked_up(submission: Submission, name: str):
    reply = submission.ask("get", name, seconds=submission.limits.call_s, doing=f"while reading {name}")
    if reply[0] == "function" and len(reply) == 2 and type(reply[1]) is str:
        return RemoteFunction(submission, name, reply[1], submission.limits.call_s)
    if reply[0] == "value" and len(reply) == 2:
        return reply[1]
    if reply[0] == "unsendable" and len(reply) == 2:
        raise SubmissionStopped(f"{name} is a {reply[1]}, which the grader cannot read back")
    if reply != ("missing",):
        raise SubmissionStopped(f"your notebook sent an unexpected reply while reading {name}")
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
    A hidden case reports its verdict in fixed words (HIDDEN_MESSAGES), never its checker's message or details;
    the identifiers of the mistakes its checker named are kept for the class report (they name no input)."""
    from gptlib import exercises
    from gptlib.checking import FAILED, Result

    safe = []  # messages of the grader's own, which say nothing of the hidden inputs
    stops = len(submission.stops)  # the submission stopped by this case's calls: submission.stops[stops:]

    def run(check: str, seed_offset: int = 0, functions: tuple[str, ...] = ()):
        answers = {name: _looked_up(submission, name) for name in _answer_names(check)}
        values = [name for name in functions  # None: a stub's slot, which the checker reads as not attempted
                  if not isinstance(answers[name], RemoteFunction) and answers[name] is not None]
        if values:
            safe.append(f"{values[0]} is a value, not a function: the hidden case asks at other points than the "
                        f"public one, so write {values[0]} as a function of its arguments.")
            return Result(test.name, FAILED, safe[-1])
        namespace = {"exercises": exercises, **answers}
        with shifted_seeds(seed_offset):
            return eval(check, namespace)

    try:
        result = case(run)
        earned = case.points if result else 0
        outcome = (result.status, result.message, () if case.hidden else tuple(result.details))
        named = tuple(dict.fromkeys(m for r in (result, *result.parts) for m in getattr(r, "mistakes", ())))
    except SubmissionStopped as gone:
        return CaseOutcome(test.name, case.hidden, case.points, 0, "error", _redacted(str(gone)) if case.hidden else str(gone))
    except Exception as error:  # the checker itself could not use the answer
        return CaseOutcome(test.name, case.hidden, case.points, 0, "error",
                           f"the grader could not use your answer ({type(error).__name__})")
    safe += submission.stops[stops:]
    if case.hidden:
        message = _redacted(safe[-1]) if safe else HIDDEN_MESSAGES.get(outcome[0], outcome[1])
        return CaseOutcome(test.name, True, case.points, earned, outcome[0], message, mistakes=named)
    return CaseOutcome(test.name, False, case.points, earned, *outcome, mistakes=named)


def _redacted(reason: str) -> str:
    """The grader's reason for a hidden case, without an exit code or signal number the student's code could choose."""
    return re.sub(r"exit code -?\d+|ended by signal \d+", "an exit status not shown for a hidden case", reason)


def read_notebook(path: Path) -> dict:
    """A submitted notebook, opened as untrusted: a regular file (not a link, FIFO or device), at most
    NOTEBOOK_BYTES, UTF-8 JSON; or NN_name.zip (grader.export()'s hand-in) holding NN_name.ipynb, read
    from the archive (never extracted by path), unpacked at most NOTEBOOK_BYTES. Raises ValueError naming
    what it is instead."""
    data = _read_regular(path)
    if path.suffix == ".zip":
        member = f"{path.stem}.ipynb"
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                info = archive.getinfo(member)
                if info.file_size > NOTEBOOK_BYTES:
                    raise ValueError(f"{member} unpacks to more than {NOTEBOOK_BYTES // 2**20} MiB")
                with archive.open(info) as file:
                    data = file.read(NOTEBOOK_BYTES + 1)[:NOTEBOOK_BYTES]
        except KeyError:
            raise ValueError(f"the zip holds no {member}") from None
        except zipfile.BadZipFile as error:
            raise ValueError(f"not a readable zip: {error}") from None
    return json.loads(data.decode("utf-8"))


def _read_regular(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise ValueError("a symbolic link: not followed" if error.errno == errno.ELOOP else error.strerror) from None
    with os.fdopen(fd, "rb") as file:
        kind = os.fstat(fd).st_mode
        if not stat.S_ISREG(kind):
            raise ValueError(f"not a regular file ({_KINDS.get(stat.S_IFMT(kind), 'special file')})")
        data = file.read(NOTEBOOK_BYTES + 1)
    if len(data) > NOTEBOOK_BYTES:
        raise ValueError(f"larger than {NOTEBOOK_BYTES // 2**20} MiB")
    return data


_KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
          stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a folder", stat.S_IFLNK: "a symbolic link"}


def grade_notebook(path: Path, tests: list[TestFile], limits: Limits) -> NotebookGrade:
    grade = NotebookGrade(path.stem)
    try:
        cells = cells_to_run(read_notebook(path))
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as error:
        reason = f"not a readable notebook: {type(error).__name__}: {str(error)[:200]}"
        grade.outcomes = [CaseOutcome(t.name, c.hidden, c.points, 0, "error", reason) for t in tests for c in t.cases]
        return grade
    submission = Submission(cells, limits)
    try:
        for test in tests:
            for case in test.cases:
                grade.outcomes.append(run_case(submission, test, case))
            grade.cell_errors = grade.cell_errors or submission.cell_errors
        grade.confinement = submission.confinement
    finally:
        submission.close()
    return grade
