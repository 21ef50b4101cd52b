"""JupyterHub on one machine for a class using gptlib (docs/teaching.md, "Serving a class").

    jupyterhub -f course/hub/jupyterhub_config.py          (make hub: after make assignments)

Each student logs in, gets a Jupyter server of their own, and at the first spawn a copy of the
released assignments (build/course/student/*) in their home folder; a later spawn never
overwrites their work. Settings from the environment:

    GPTLIB_HUB_PORT       the hub's public port on 127.0.0.1 (8000); the hub's own API and the proxy's API
                          take the next two (8001, 8002)
    GPTLIB_HUB_DATA       the hub's database, cookie secret, pid files (build/hub)
    GPTLIB_HUB_RELEASE    the folder copied to each new user (build/course/student)
    GPTLIB_HUB_PROXY      the configurable-http-proxy command (build/hub/node_modules/.bin/...)
    GPTLIB_HUB_TEST       "1": test mode, below
    GPTLIB_HUB_PASSWORD   test mode: the password every user logs in with
    GPTLIB_HUB_API_TOKEN  test mode: a token for the admin service "course-test" (tests drive the hub with it)

Test mode (tests/course/test_hub.py) uses JupyterHub's DummyAuthenticator (one shared password)
and SimpleLocalProcessSpawner (servers run as the hub's own Unix user, homes under
GPTLIB_HUB_DATA/homes): each user's server sees only their own folder, but that is the server's
root, not an operating-system boundary. For a real class on one machine keep the defaults: PAM
logins (the machine's accounts) and LocalProcessSpawner, which starts each server as that Unix
user in their own home, so the operating system keeps students' files apart.
"""

import os
import shutil
import sys
from pathlib import Path

c = get_config()  # noqa: F821  (JupyterHub's config loader defines it)

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("GPTLIB_HUB_DATA", ROOT / "build" / "hub"))
RELEASE = Path(os.environ.get("GPTLIB_HUB_RELEASE", ROOT / "build" / "course" / "student"))
DATA.mkdir(parents=True, exist_ok=True)

c.JupyterHub.ip = "127.0.0.1"
PORT = int(os.environ.get("GPTLIB_HUB_PORT", "8000"))
c.JupyterHub.port = PORT
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = PORT + 1
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{PORT + 2}"
c.JupyterHub.db_url = f"sqlite:///{DATA / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(DATA / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(DATA / "jupyterhub.pid")
c.ConfigurableHTTPProxy.pid_file = str(DATA / "proxy.pid")
c.ConfigurableHTTPProxy.command = [os.environ.get("GPTLIB_HUB_PROXY", str(ROOT / "build" / "hub" / "node_modules" / ".bin" /
                                                                         "configurable-http-proxy"))]

# The single-user server: this Python's jupyterhub-singleuser (gptlib and JupyterLab installed beside it; on one
# machine the hub's environment, so the course kit too: no answer or hidden test is in it, those stay in build/course).
c.Spawner.cmd = [str(Path(sys.executable).parent / "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 120
c.Spawner.mem_limit = "2G"  # enforced by Kubernetes (Helm values), advisory here: see docs/teaching.md
if "PYTHONPATH" in os.environ:
    c.Spawner.environment = {"PYTHONPATH": os.environ["PYTHONPATH"]}


def copy_release(spawner) -> None:
    """Hand out the assignments: copy each released folder the user does not have yet."""
    home = Path(spawner.home_dir if hasattr(spawner, "home_dir_template") else os.path.expanduser(f"~{spawner.user.name}"))
    home.mkdir(parents=True, exist_ok=True)
    for folder in sorted(RELEASE.glob("*")) if RELEASE.is_dir() else []:
        if folder.is_dir() and not (home / folder.name).exists():
            shutil.copytree(folder, home / folder.name)
            if os.geteuid() == 0 and not hasattr(spawner, "home_dir_template"):
                shutil.chown(home / folder.name, spawner.user.name)
                for path in (home / folder.name).rglob("*"):
                    shutil.chown(path, spawner.user.name)


if os.environ.get("GPTLIB_HUB_TEST") == "1":
    c.JupyterHub.authenticator_class = "dummy"
    c.DummyAuthenticator.password = os.environ["GPTLIB_HUB_PASSWORD"]
    c.Authenticator.allow_all = True
    c.JupyterHub.spawner_class = "simple"
    c.SimpleLocalProcessSpawner.home_dir_template = str(DATA / "homes" / "{username}")
    c.SimpleLocalProcessSpawner.args = ["--allow-root"] if os.geteuid() == 0 else []
    c.JupyterHub.services = [{"name": "course-test", "api_token": os.environ["GPTLIB_HUB_API_TOKEN"]}]
    c.JupyterHub.load_roles = [{"name": "course-test", "services": ["course-test"],
                                "scopes": ["admin:users", "admin:servers", "admin:server_state", "tokens", "access:servers",
                                           "read:users"]}]
else:
    c.JupyterHub.authenticator_class = "pam"
    c.LocalAuthenticator.create_system_users = False
    c.JupyterHub.spawner_class = "localprocess"
c.Spawner.pre_spawn_hook = copy_release
