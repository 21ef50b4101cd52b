"""course/hub/jupyterhub_config.py on 127.0.0.1: two students log in, get their own servers with the
released assignment copied in, run a checker through grader.check in their own kernels, and see
only their own files.

About a minute on a quiet 2-core machine (two servers and two kernels start). `make test` and
`make test-hub` install configurable-http-proxy (npm, into build/hub) first; without it the test is
skipped, except in CI, where it fails. Every process it starts is bounded by a timeout and killed
at the end, servers included. In test mode the servers run as the hub's Unix user: "only their own
files" is checked through each user's server and the hub's authorization, not the kernel's file
system (course/hub/jupyterhub_config.py says how a real class gets one Unix user per student).
"""

import asyncio
import concurrent.futures
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import requests

from gptlib_course import assign
from tests.support.notebook_files import NOTEBOOKS

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "course" / "hub" / "jupyterhub_config.py"
PROXY = ROOT / "build" / "hub" / "node_modules" / ".bin" / "configurable-http-proxy"
JUPYTERHUB = Path(sys.executable).parent / "jupyterhub"
NB05 = "05_gpt_and_parameter_count"
USERS = ("ann", "ben")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not PROXY.exists() and not os.environ.get("CI"),
                       reason=f"configurable-http-proxy is not installed at {PROXY.relative_to(ROOT)} (make hub-proxy)"),
]


def _free_port_block() -> int:
    """A port p with p, p + 1 and p + 2 free on 127.0.0.1 (the hub, its API, the proxy's API)."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port + 2 < 65536 and all(_free(port + i) for i in range(3)):
            return port
    raise RuntimeError("no block of three free ports")


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def _until(condition, seconds: float, what: str, log: Path):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"{what} within {seconds:g} s; hub log:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    data = tmp_path_factory.mktemp("hub")
    assign.build([p for p in NOTEBOOKS if p.stem == NB05], data / "course")
    port, token, password = _free_port_block(), secrets.token_hex(16), secrets.token_hex(8)
    env = {**os.environ, "GPTLIB_HUB_TEST": "1", "GPTLIB_HUB_PORT": str(port), "GPTLIB_HUB_DATA": str(data),
           "GPTLIB_HUB_RELEASE": str(data / "course" / "student"), "GPTLIB_HUB_PROXY": str(PROXY),
           "GPTLIB_HUB_PASSWORD": password, "GPTLIB_HUB_API_TOKEN": token, "PYTHONPATH": str(ROOT)}
    log = data / "hub.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(["timeout", "-s", "TERM", "600", str(JUPYTERHUB), "-f", str(CONFIG)], cwd=data, env=env,
                                   stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    api = {"Authorization": f"token {token}"}

    def up():
        try:
            return requests.get(f"{url}/hub/api/", timeout=5).status_code == 200
        except requests.ConnectionError:
            return False

    pids = []
    try:
        _until(up, 90, "the hub did not answer", log)
        yield {"url": url, "api": api, "password": password, "log": log, "data": data, "pids": pids}
    finally:
        for user in USERS:
            try:
                state = requests.get(f"{url}/hub/api/users/{user}", headers=api, timeout=10).json()
                pids.append(state["servers"][""]["state"]["pid"])
                requests.delete(f"{url}/hub/api/users/{user}/server", headers=api, timeout=30)
            except (requests.RequestException, KeyError, TypeError, ValueError):
                pass
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        for pid in pids:  # a server the hub could not stop
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def _login(hub, user: str) -> "requests.Session":
    session = requests.Session()
    session.get(f"{hub['url']}/hub/login", timeout=10)
    form = {"username": user, "password": hub["password"], "_xsrf": session.cookies.get("_xsrf", "")}
    reply = session.post(f"{hub['url']}/hub/login", data=form, timeout=30, allow_redirects=False)
    assert reply.status_code == 302, f"login of {user}: {reply.status_code}"
    wrong = requests.post(f"{hub['url']}/hub/login", data={**form, "password": "wrong"}, timeout=30, allow_redirects=False,
                          cookies=session.cookies)
    assert wrong.status_code != 302, "a wrong password must not log in"
    return session


def _spawn(hub, user: str) -> str:
    """Start the user's server; returns a token of that user's, for its server's API."""
    url, api = hub["url"], hub["api"]
    reply = requests.post(f"{url}/hub/api/users/{user}/server", headers=api, timeout=30)
    assert reply.status_code in (201, 202), reply.text

    def ready():
        servers = requests.get(f"{url}/hub/api/users/{user}", headers=api, timeout=10).json().get("servers", {})
        return servers.get("", {}).get("ready")

    _until(ready, 180, f"{user}'s server did not start", hub["log"])
    reply = requests.post(f"{url}/hub/api/users/{user}/tokens", headers=api, json={"expires_in": 600}, timeout=10)
    return reply.json()["token"]


def _in_own_thread(function, *args):
    """function(*args) in a thread of its own: the browser tests' Playwright keeps an event loop
    running in the main thread of a worker they share, where asyncio.run() would refuse to start."""
    with concurrent.futures.ThreadPoolExecutor(1) as thread:
        return thread.submit(function, *args).result()


async def _execute(ws_url: str, token: str, code: str, seconds: float) -> str:
    """Run code in a kernel over the Jupyter websocket; the text it printed."""
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    request = HTTPRequest(ws_url, headers={"Authorization": f"token {token}"})
    connection = await asyncio.wait_for(websocket_connect(request), seconds)
    msg_id = uuid.uuid4().hex
    header = {"msg_id": msg_id, "username": "test", "session": uuid.uuid4().hex, "msg_type": "execute_request",
              "version": "5.3", "date": ""}
    content = {"code": code, "silent": False, "store_history": False, "user_expressions": {}, "allow_stdin": False}
    await connection.write_message(json.dumps({"header": header, "parent_header": {}, "metadata": {}, "content": content,
                                               "channel": "shell", "buffers": []}))
    printed = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        message = await asyncio.wait_for(connection.read_message(), max(0.1, deadline - time.monotonic()))
        message = json.loads(message)
        if message.get("parent_header", {}).get("msg_id") != msg_id:
            continue
        kind = message["header"]["msg_type"]
        if kind == "stream":
            printed.append(message["content"]["text"])
        elif kind == "error":
            printed.append("\n".join(message["content"]["traceback"]))
        elif kind == "status" and message["content"]["execution_state"] == "idle":
            break
    connection.close()
    return "".join(printed)


CHECK = f"""
import os
from gptlib.exercises.answers.solutions import count
from gptlib.assignment.grader import Notebook
report = Notebook("{NB05}/tests", {{"count": count}}).check("parameter_count")
print(bool(report), sorted(name for name in os.listdir(".") if not name.startswith(".")))
"""


def test_two_students_log_in_spawn_check_and_see_only_their_own_files(hub):
    url = hub["url"]
    tokens = {}
    for user in USERS:
        _login(hub, user)
        tokens[user] = _spawn(hub, user)
        mine = {"type": "file", "format": "text", "content": f"{user}'s work"}
        reply = requests.put(f"{url}/user/{user}/api/contents/mine.txt", headers={"Authorization": f"token {tokens[user]}"},
                             json=mine, timeout=30)
        assert reply.status_code in (200, 201), reply.text
    for user, other in zip(USERS, reversed(USERS)):
        auth = {"Authorization": f"token {tokens[user]}"}
        listing = requests.get(f"{url}/user/{user}/api/contents/", headers=auth, timeout=30).json()
        assert sorted(item["name"] for item in listing["content"]) == sorted([NB05, "mine.txt"])
        own = requests.get(f"{url}/user/{user}/api/contents/mine.txt", headers=auth, timeout=30).json()
        assert own["content"] == f"{user}'s work"
        refused = requests.get(f"{url}/user/{other}/api/contents/mine.txt", headers=auth, timeout=30, allow_redirects=False)
        assert refused.status_code in (302, 403), f"{user} read {other}'s file: {refused.status_code}"
        kernel = requests.post(f"{url}/user/{user}/api/kernels", headers=auth, json={}, timeout=60).json()["id"]
        ws = f"ws://127.0.0.1:{url.rsplit(':', 1)[1]}/user/{user}/api/kernels/{kernel}/channels"
        printed = _in_own_thread(asyncio.run, _execute(ws, tokens[user], CHECK, 120))
        assert printed.strip() == f"True {sorted([NB05, 'mine.txt'])}", printed
    shutil.rmtree(hub["data"] / "homes", ignore_errors=True)
