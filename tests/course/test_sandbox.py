"""The sandbox a submission runs in (course/gptlib_course/sandbox.py, and inside/ what runs in it), tried from
inside by hostile cells.

Each test runs cells in a submission's process (judge.Submission, forked in this test process's
sandbox) that try something a student should not be able to do, and reads back what they saw.
The last test grades a small class as an ordinary user (uid 54321, under LC_ALL=C), through the
command line, as an instructor without root would.
"""

import csv
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from gptlib_course import assign, gradebook, sandbox
from gptlib_course.__main__ import UNCONFINED, main
from gptlib_course.judge import Submission, SubmissionStopped
from gptlib_course.limits import Limits
from gptlib_course.questions import questions
from gptlib_course.sandbox import Sandbox
from tests.support import course_class
from tests.support.notebook_files import NOTEBOOKS

pytestmark = pytest.mark.slow  # starts processes: `pytest -m slow` (not in `pytest -m unit`)

ROOT = Path(__file__).resolve().parents[2]
ORDINARY = 54321  # a uid no account has: the ordinary user of the last test


@pytest.fixture(scope="module")
def shared():
    """A folder the submissions may read (Limits.read_only): a file anyone may read, and one only its
    owner may (root's, when the tests run as root)."""
    (ROOT / "build").mkdir(exist_ok=True)  # not under /tmp, where the sandbox has its own
    folder = Path(tempfile.mkdtemp(prefix="sandbox-test-", dir=ROOT / "build"))
    os.chmod(folder, 0o755)
    (folder / "public.txt").write_text("anyone")
    (folder / "secret.txt").write_text("root only")
    os.chmod(folder / "public.txt", 0o644)
    os.chmod(folder / "secret.txt", 0o600)
    yield folder
    shutil.rmtree(folder)


@pytest.fixture(scope="module")
def limits(shared):
    problem = sandbox.confinement_problem()
    assert problem is None, f"this machine cannot confine submissions ({problem}): `make system-packages`"
    yield Limits(cells_s=60, call_s=10, tmp=8 * 2**20, read_only=(str(shared),))
    if Sandbox._current is not None:
        Sandbox._current.close()
        Sandbox._current = None


def seen(limits: Limits, code: str, *names: str) -> list:
    """Run `code` as a submission's only cell, then read the values it left in `names`."""
    submission = Submission([(0, code)], limits)
    try:
        replies = [submission.ask("get", name, seconds=limits.call_s, doing="reading") for name in names]
        assert not submission.cell_errors, submission.cell_errors
        assert all(reply[0] == "value" for reply in replies), replies
        return [reply[1] for reply in replies]
    finally:
        submission.close()


def bound_in_tmp(limits: Limits) -> list[str]:
    """The folders right under /tmp that hold code the sandbox binds (in a clone under a temp folder,
    gptlib's): they stay there, read-only, when /tmp is emptied between submissions."""
    paths = [Path(p) for p in [*sandbox.python_paths(), *limits.read_only]]
    return sorted({p.parts[2] for p in paths if p.is_relative_to("/tmp")})


def _status(pid) -> dict[str, str]:
    text = Path(f"/proc/{pid}/status").read_text()
    return {key: value.strip() for key, value in (line.split(":", 1) for line in text.splitlines())}


def _descendants(pid: int) -> list[int]:
    children = [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    return children + [d for c in children for d in _descendants(c)]


def test_a_submission_runs_as_nobody_with_no_capability_and_no_way_back(limits):
    code = ("import os, time\nuid = os.getuid()\nstatus = open('/proc/self/status').read()\n"
            "if os.fork() == 0:\n    time.sleep(3600)")  # a child, seen from the host below
    submission = Submission([(0, code)], limits)
    try:
        uid, status = (submission.ask("get", name, seconds=10, doing="reading")[1] for name in ("uid", "status"))
        fields = dict(line.split(":\t") for line in status.splitlines() if ":\t" in line)
        assert uid == sandbox.NOBODY
        assert {key: fields[key].strip() for key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs")} == {
            "CapInh": "0" * 16, "CapPrm": "0" * 16, "CapEff": "0" * 16, "CapBnd": "0" * 16, "CapAmb": "0" * 16,
            "NoNewPrivs": "1"}
        # From the host: the inner bwrap, its zygote, the submission and its child run as nobody (graded by
        # root) or as the grading user, never uid 0; only the outer bwrap that waits for them is root's.
        started = Sandbox.get(limits).process.pid
        inside = _descendants(started) if os.geteuid() == 0 else [started, *_descendants(started)]
        expected = sandbox.NOBODY if os.geteuid() == 0 else os.geteuid()
        uids = {p: _status(p)["Uid"].split() for p in inside}
        assert len(uids) >= 4 and all(u == [str(expected)] * 4 for u in uids.values()), uids
        assert all(_status(p)["CapEff"] == "0" * 16 for p in inside)
    finally:
        submission.close()


def test_a_submission_sees_no_process_and_no_file_of_the_host(limits, shared):
    """Its /proc holds its zygote (PID 1) and itself; its / holds the libraries, Python, gptlib, the kit's
    inside package (/kit), the shared test folder, its writable /tmp, /proc and /dev;
    no /etc/shadow, no home, no host /proc."""
    code = ("import os\npids = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())\nme = os.getpid()\n"
            "top = sorted(os.listdir('/'))\netc = sorted(os.listdir('/etc'))\n"
            "def attempt(path):\n    try:\n        return open(path).read()\n    except OSError as error:\n"
            "        return type(error).__name__\n"
            f"reads = [attempt(p) for p in ('/etc/shadow', '/etc/passwd', '/proc/1/environ', "
            f"{str(shared / 'public.txt')!r}, {str(shared / 'secret.txt')!r})]")
    pids, me, top, etc, reads = seen(limits, code, "pids", "me", "top", "etc", "reads")
    assert pids == sorted({1, me})
    assert set(top) <= {"usr", "lib", "lib64", "etc", "tmp", "proc", "dev", sandbox.SANDBOX_TMP[1:], sandbox.KIT_AT[1:]} | {
        Path(p).parts[1] for p in [*sandbox.python_paths(), str(shared)]}
    assert etc == ["ld.so.cache"]
    assert reads[:3] == ["FileNotFoundError", "FileNotFoundError", "PermissionError"]
    assert reads[3] == "anyone"
    if os.geteuid() == 0:
        assert reads[4] == "PermissionError"  # root's 0600 file, in a folder the submission can read
    else:
        pytest.skip("a file only root reads needs the tests to run as root (the sandbox runs as the grading user)")


def test_a_submission_cannot_signal_its_parent_nor_stop_the_next_one(limits):
    """Signals to its parent (the zygote, PID 1), to PID 1 and to every process it may signal change
    nothing: the grader goes on, and the next submission starts from the same zygote."""
    code = ("import os, signal\nparent = os.getppid()\nrefused = []\n"
            "for pid, sig in ((parent, 9), (1, 9), (1, 15), (1, 2), (-1, 9)):\n"
            "    try:\n        os.kill(pid, sig)\n    except OSError as error:\n        refused.append(error.errno)")
    zygote = Sandbox.get(limits).process.pid
    assert seen(limits, code, "parent") == [1]
    assert Sandbox.get(limits).process.pid == zygote and Sandbox._current.process.poll() is None
    assert seen(limits, "alive = True", "alive") == [True]


def test_nothing_a_submission_starts_outlives_it(limits):
    """A daemon (double fork, setsid) that sleeps for an hour is gone when the next submission starts."""
    code = ("import os, time\nreader, writer = os.pipe()\n"
            "if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
            "        os.write(writer, str(os.getpid()).encode())\n        time.sleep(3600)\n    os._exit(0)\n"
            "daemon = int(os.read(reader, 20))\nalive = os.path.exists(f'/proc/{daemon}')")
    daemon, alive = seen(limits, code, "daemon", "alive")
    assert alive
    pids, me = seen(limits, "import os\npids = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())\n"
                            "me = os.getpid()", "pids", "me")
    assert daemon not in pids and pids == sorted({1, me})


def test_a_fork_bomb_stops_at_the_process_limit(limits):
    code = ("import os, time\nforked, error = 0, None\n"
            "try:\n    for _ in range(100_000):\n        if os.fork() == 0:\n            time.sleep(3600)\n"
            "            os._exit(0)\n        forked += 1\nexcept OSError as e:\n    error = e.errno")
    forked, error = seen(limits, code, "forked", "error")
    assert error == 11  # EAGAIN: RLIMIT_NPROC, counted for the sandbox's user in its own namespace
    assert limits.processes - 8 <= forked < limits.processes  # the zygote and the submission count too
    assert seen(limits, "import os\nn = sum(p.isdigit() for p in os.listdir('/proc'))", "n") == [2]


def test_only_tmp_is_writable_and_it_is_bounded(limits):
    code = ("import os\nimport gptlib\n"
            "def writes(path):\n    try:\n        open(path, 'w').close()\n        return True\n"
            "    except OSError:\n        return False\n"
            "where = [writes(p) for p in ('/tmp/a', '/b', '/usr/lib/c', '/dev/d', '/proc/e', "
            "os.path.join(os.path.dirname(gptlib.__file__), 'f'))]\n"
            "written = 0\ntry:\n    for i in range(1000):\n        with open(f'/tmp/{i}', 'wb') as file:\n"
            "            file.write(b'x' * 2**20)\n        written += 2**20\nexcept OSError:\n    pass")
    where, written = seen(limits, code, "where", "written")
    assert where == [True, False, False, False, False, False]
    assert written <= limits.tmp
    left = "import os\nleft = [f for f in os.listdir('/tmp') if not f.startswith('.')]"  # IPython makes /tmp/.ipython
    assert seen(limits, left, "left") == [bound_in_tmp(limits)]  # the next one starts with an empty /tmp


KIT = sandbox.KIT  # gptlib_course, the grading kit: the judge's code, the hidden tests' reader
HOST_SIDE = ("gptlib_course.judge", "gptlib_course.assign", "gptlib_course.sandbox", "gptlib_course.remote_module")
LOOK_FOR_THE_KIT = (  # a hostile cell: the kit's modules imported, even from its folder put on sys.path, and its files
    "import importlib, os, sys\n"
    f"sys.path.insert(0, {str(KIT.parent)!r})\n"
    "def attempt(name):\n    try:\n        importlib.import_module(name)\n        return 'imported'\n"
    "    except ImportError as error:\n        return type(error).__name__\n"
    f"imports = [attempt(name) for name in {HOST_SIDE!r}]\n"
    f"kit = sorted(os.listdir({str(KIT)!r})) if os.path.isdir({str(KIT)!r}) else None\n"
    f"beside = sorted(os.listdir({str(KIT.parent)!r})) if os.path.isdir({str(KIT.parent)!r}) else None\n"
    f"held = sorted(os.path.relpath(os.path.join(folder, name), {sandbox.KIT_AT!r}) "
    f"for folder, _, names in os.walk({sandbox.KIT_AT!r}) if '__pycache__' not in folder for name in names)")
INSIDE = sorted(str(path.relative_to(KIT.parent)) for path in sandbox.INSIDE.glob("*.py"))  # what the sandbox holds of the kit


def test_a_submission_finds_nothing_of_the_grading_kit_but_its_inside_package(limits):
    """Of gptlib_course the sandbox holds the package `inside` alone (the zygote, the submission's half of a module's
    mirror), at /kit/gptlib_course/inside: no module of the host side imports, the kit's folder is not there."""
    assert "gptlib_course/inside/zygote.py" in INSIDE and "gptlib_course/inside/remote_module.py" in INSIDE
    imports, kit, beside, held = seen(limits, LOOK_FOR_THE_KIT, "imports", "kit", "beside", "held")
    assert (imports, kit, beside, held) == (["ModuleNotFoundError"] * len(HOST_SIDE), None, None, INSIDE)


def test_where_a_bound_folder_holds_the_grading_kit_its_folder_is_empty(limits):
    """Installed into the virtualenv (pip install ./course, not editable), the kit lies in a folder the
    sandbox binds: there an empty tmpfs covers it. Here course/, bound as such a folder, stands in for
    site-packages: what is beside the kit is seen, the kit's folder is empty and nothing of it imports."""
    beside_the_kit = dataclasses.replace(limits, read_only=(*limits.read_only, str(KIT.parent)))
    imports, kit, beside, held = seen(beside_the_kit, LOOK_FOR_THE_KIT, "imports", "kit", "beside", "held")
    assert kit == [] and KIT.name in beside and "pyproject.toml" in beside
    assert imports == ["ModuleNotFoundError"] * len(HOST_SIDE) and held == INSIDE


def test_code_under_the_temp_folder_is_bound_read_only_inside_a_writable_tmp(limits):
    """Where Python, the virtualenv or gptlib lives under /tmp (a clone in a CI runner's or an instructor's
    temp folder), the sandbox binds it there read-only, over the submission's own /tmp: the submission
    reads the code and writes temp files, but cannot write, move or remove the code or a folder above it;
    the next submission finds the code there and nothing else the last one left."""
    top = Path(tempfile.mkdtemp(prefix="sandbox-code-", dir="/tmp"))  # 0700, root's when the tests run as root
    try:
        code = top / "clone" / "lib"
        code.mkdir(parents=True)
        (code / "shipped.py").write_text("VALUE = 42\n")
        in_tmp = dataclasses.replace(limits, read_only=(*limits.read_only, str(code)))
        tries = (
            "import os, sys, tempfile\n"
            f"sys.path.insert(0, {str(code)!r})\nimport shipped\nvalue = shipped.VALUE\n"
            "def attempt(action):\n    try:\n        action()\n        return True\n"
            "    except OSError:\n        return False\n"
            f"done = [attempt(a) for a in (lambda: open('/tmp/mine', 'w').close(), tempfile.mkstemp,\n"
            f"    lambda: open({str(code / 'mine')!r}, 'w').close(), lambda: open({str(top / 'mine')!r}, 'w').close(),\n"
            f"    lambda: os.rename({str(top)!r}, '/tmp/moved'), lambda: os.rename({str(code.parent)!r}, '/tmp/moved'),\n"
            f"    lambda: os.rename({str(code.parent)!r}, {str(top / 'moved')!r}), lambda: os.rmdir({str(top)!r}))]")
        assert seen(in_tmp, tries, "value", "done") == [42, [True, True, False, False, False, False, False, False]]
        after = (f"import os\nleft = sorted(f for f in os.listdir('/tmp') if not f.startswith('.'))\n"
                 f"code = sorted(os.listdir({str(code)!r}))")
        assert seen(in_tmp, after, "left", "code") == [bound_in_tmp(in_tmp), ["shipped.py"]]
    finally:
        shutil.rmtree(top)


def test_grade_refuses_to_run_unconfined_unless_told(tmp_path, monkeypatch, capsys):
    (tmp_path / "build" / "autograder" / "01_none").mkdir(parents=True)
    (tmp_path / "build" / "autograder" / "01_none" / "questions.json").write_text("[]\n")
    (tmp_path / "submissions" / "ada").mkdir(parents=True)  # nothing handed in: no submission runs
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on it
    argv = ["grade", str(tmp_path / "submissions"), "--out", str(tmp_path / "build"), "--no-progress"]
    assert main(argv) == 2
    assert "cannot confine submissions: bubblewrap (bwrap) is not installed" in capsys.readouterr().err
    assert main([*argv, UNCONFINED]) == 0



def test_unconfined_the_same_zygote_runs_submissions_as_the_grading_user(limits):
    """--unconfined-...: no bwrap; the zygote, the same module of the inside package run from the kit's own folder,
    forks each submission, which runs as the grading user with its limits."""
    unconfined = dataclasses.replace(limits, confined=False)
    code = ("import os, resource\nuid = os.getuid()\nparent = open(f'/proc/{os.getppid()}/cmdline').read().split('\\0')\n"
            "processes = resource.getrlimit(resource.RLIMIT_NPROC)[0]")
    uid, parent, processes = seen(unconfined, code, "uid", "parent", "processes")
    assert uid == os.getuid() and processes == limits.processes
    assert parent[1:4] == ["-P", "-m", sandbox.ZYGOTE]



def test_unconfined_a_judge_that_hangs_up_leaves_no_submission_running(limits):
    """A judge killed while a cell runs (Ctrl-C kills the judges) hangs up on its zygote without ending the
    submission: the zygote ends it before it ends itself (confined, the namespace would; unconfined, the
    submission's own session would outlive the zygote)."""
    submission = Submission([(0, "x = 1")], dataclasses.replace(limits, confined=False))
    submission.start()  # the cells ran: the process waits for the checker's requests
    box = Sandbox._current
    assert _status(submission.pid)["State"][0] != "Z"
    box.socket.close()  # as a killed judge's end closes
    box.process.wait(timeout=60)
    assert not Path(f"/proc/{submission.pid}").exists() or _status(submission.pid)["State"][0] == "Z"
    for connection in (submission.outbound, submission.inbound):
        connection.close()
    box.close()
    Sandbox._current = None


def test_a_sandbox_that_cannot_start_stops_the_submission_with_bwraps_reason(limits):
    """A sandbox whose zygote never says it is ready (here bwrap cannot bind a path that does not exist) stops the
    submission with bwrap's own words and a line for the instructor, never an exception of the judge's."""
    missing = dataclasses.replace(limits, read_only=("/nonexistent-gptlib-folder",))
    with pytest.raises(SubmissionStopped):  # a first try ends the sandbox an earlier test left running, if any
        Submission([(0, "x = 1")], missing).start()
    submission = Submission([(0, "x = 1")], missing)
    open_before = sorted(os.listdir("/proc/self/fd"))
    with pytest.raises(SubmissionStopped, match=r"^the grader could not start its sandbox \(bwrap: .*"
                                                r"/nonexistent-gptlib-folder.*\): tell your instructor$"):
        submission.start()
    assert submission.broken and submission.stops == [submission.broken]
    assert sorted(os.listdir("/proc/self/fd")) == open_before, "a failed start leaves no pipe or socket open"


def _reachable(path: str) -> list[str]:
    """Arguments of a bwrap run as root that let any user reach `path` (the Python install may be in
    root's 0700 home): a tmpfs over the first folder above it others cannot enter, folders down to it."""
    parts = Path(path).parts
    for depth in range(2, len(parts)):
        closed = Path(*parts[:depth])
        if not os.stat(closed).st_mode & 0o001:
            below = [str(Path(*parts[:d])) for d in range(depth + 1, len(parts))]
            return ["--tmpfs", str(closed), *[a for d in below for a in ("--perms", "0755", "--dir", d)],
                    "--ro-bind", path, path]
    return []


def test_an_ordinary_user_grades_a_class_under_any_locale(tmp_path_factory):
    """`python -m gptlib_course grade` as uid 54321 (no account, no capability) with LC_ALL=C: the
    sandbox confines each submission (the process snoop and the fork bomb score full points only
    so), and a student's folder name reaches the CSV and the feedback's file name as it is spelled in
    UTF-8 (Python reads file names as ASCII there, PYTHONUTF8=0 and PYTHONCOERCECLOCALE=0 keeping it so),
    one that is not UTF-8 as text, its odd byte as \\xNN."""
    name = "05_gpt_and_parameter_count"
    root = Path(tempfile.mkdtemp(prefix="gptlib-ordinary-"))
    try:
        build, subs = root / "build", root / "submissions"
        assign.build([p for p in NOTEBOOKS if p.stem == name], build)
        released = json.loads((build / "student" / name / f"{name}.ipynb").read_text())
        asked = questions(json.loads(next(p for p in NOTEBOOKS if p.stem == name).read_text()))
        correct = course_class.code(name, asked, wrong=False)
        hostile = course_class.confined()
        students = {b"stud\xe9nt": correct, "José".encode(): correct, b"procsnoop": correct + "\n" + hostile["procsnoop"],
                    b"bomb": correct + "\n" + hostile["bomb"]}
        for student, code in students.items():
            (subs / os.fsdecode(student)).mkdir(parents=True)
            (subs / os.fsdecode(student) / f"{name}.ipynb").write_text(json.dumps(course_class.submission(released, code)))
        command = [sys.executable, "-m", "gptlib_course", "grade", str(subs), "--out", str(build), "--workers", "1",
                   "--no-progress", "--cells-s", "90", "--call-s", "10"]
        env = {"PATH": os.environ["PATH"], "LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0", "HOME": str(root),
               "PYTHONPATH": f"{ROOT}:{ROOT / 'course'}", "PYTHONDONTWRITEBYTECODE": "1"}
        if os.geteuid() == 0:
            subprocess.run(["chown", "-R", f"{ORDINARY}:{ORDINARY}", str(root)], check=True, timeout=60)
            view = [a for p in sandbox.python_paths() for a in _reachable(p)]
            command = ["bwrap", "--dev-bind", "/", "/", *view, "--die-with-parent", "--", "setpriv",
                       f"--reuid={ORDINARY}", f"--regid={ORDINARY}", "--clear-groups", "--no-new-privs",
                       "--inh-caps=-all", "--bounding-set=-all", *command]
        done = subprocess.run(command, env=env, capture_output=True, timeout=600, cwd=root)
        assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
        with open(build / "grades" / "grades.csv", encoding="utf-8") as file:
            rows = {row["student"]: row for row in csv.DictReader(file)}
        assert set(rows) == {"stud\\xe9nt", "José", "procsnoop", "bomb"}
        assert sorted(p.name for p in (build / "grades" / "feedback").iterdir()) == sorted(
            f"{gradebook.file_name(s.decode('utf-8', 'surrogateescape'))}.html" for s in students)
        assert all(float(row[f"{name}:score"]) > 0 and float(row["overall_percent"]) == 100 for row in rows.values()), rows
    finally:
        shutil.rmtree(root, ignore_errors=True)
