"""Servers and a browser for the browser tests and benchmarks.roundtrip: a real JupyterLab or Voila
server on 127.0.0.1, and the flags that keep headless Debian Chromium off this machine's closed network.

The notebooks are copied into a temporary root (JupyterLab autosaves into what it opens), and
each server gets its own config, runtime, settings and IPython directories. A plain module, not
the conftest, so that tests and benchmarks import it by a name that means one file.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_env(tmp: Path) -> dict:
    """The environment of a server under test: its own Jupyter, IPython and matplotlib dirs."""
    return dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(tmp / "config"),
        JUPYTER_RUNTIME_DIR=str(tmp / "runtime"),
        JUPYTERLAB_SETTINGS_DIR=str(tmp / "settings"),
        IPYTHONDIR=str(tmp / "ipython"),
        MPLCONFIGDIR=str(tmp / "mpl"),
    )


@contextlib.contextmanager
def serve(cmd: list[str], ready_url: str, log_path: Path, env: dict | None = None):
    """Start a server process, wait until `ready_url` answers, and stop it (the one we started) after."""
    log = open(log_path, "w")
    server = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(ready_url, timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{cmd[2]} did not start; see {log_path}")
                time.sleep(0.3)
        yield
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


EXPOSE_APP = {"jupyterlab": "--LabApp.expose_app_in_browser=True",  # window.jupyterapp, for the tests
              "notebook": "--JupyterNotebookApp.expose_app_in_browser=True"}


@contextlib.contextmanager
def lab_server(tmp: Path, app: str = "jupyterlab"):
    """A JupyterLab server (app="notebook": Notebook 7's) on 127.0.0.1 serving a copy of notebooks/
    (in tmp); yields (base_url, token)."""
    root = tmp / "notebooks"
    shutil.copytree(ROOT / "notebooks", root, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    settings = tmp / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
    port, token = free_port(), secrets.token_hex(16)
    cmd = [
        sys.executable, "-m", app, "--no-browser", "--ip=127.0.0.1", f"--port={port}",
        "--port-retries=0", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", EXPOSE_APP[app],
    ]
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    base = f"http://127.0.0.1:{port}"
    with serve(cmd, f"{base}/api/status?token={token}", tmp / "server.log", server_env(tmp)):
        yield base, token


@contextlib.contextmanager
def voila_server(tmp: Path):
    """`make app`'s Voila server (app/explorers.ipynb, code hidden) on 127.0.0.1; yields its URL."""
    port = free_port()
    cmd = [
        sys.executable, "-m", "voila", str(ROOT / "app" / "explorers.ipynb"), "--Voila.ip=127.0.0.1",
        f"--port={port}", "--Voila.port_retries=0", "--no-browser", "--strip_sources=True",
        f"--Voila.config_file_paths=['{ROOT / 'app'}']",  # app/voila.json: no request leaves 127.0.0.1 (CSP)
    ]
    base = f"http://127.0.0.1:{port}"
    env = server_env(tmp) | {"JUPYTER_PATH": str(ROOT / "app" / "jupyter")}  # the app's template (app/voila.json)
    with serve(cmd, f"{base}/voila/static/voila.js", tmp / "server.log", env):
        yield base


def offline_context(browser):
    """A 1400 x 1000 browser context whose requests that leave 127.0.0.1 are refused at once."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.route(re.compile(r"^https?://(?!127\.0\.0\.1[:/])"), lambda route: route.abort())
    return context
