"""Peak memory of a student's kernel per notebook: what the Helm values' per-user memory is sized from.

    python -m benchmarks.course_memory [notebooks/NN_*.ipynb ...]

Runs each notebook top to bottom in a fresh kernel (nbclient, as a student who runs every cell)
and reads the kernel's peak resident memory (VmHWM in /proc) before shutting it down; also an
idle kernel (gptlib imported) and a JupyterLab server without kernels, the rest of a student's
footprint. Linux only.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from jupyter_client.manager import start_new_kernel
from nbclient import NotebookClient

from gptlib.__main__ import shipped_notebooks

ROOT = Path(__file__).resolve().parents[1]


def peak_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM")


def run(path: Path | None) -> float:
    manager, client = start_new_kernel(kernel_name="python3", cwd=str(ROOT / "notebooks"))
    try:
        if path is None:
            client.execute_interactive("import gptlib, torch", timeout=300)
        else:
            notebook = nbformat.read(path, as_version=4)
            runner = NotebookClient(notebook, timeout=900, km=manager)
            runner.kc = client
            runner.execute(cleanup_kc=False)
        return peak_mib(manager.provisioner.process.pid)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def server_mib() -> float:
    """Peak resident memory of a JupyterLab server (no kernel), once it answers on 127.0.0.1."""
    import socket
    import subprocess
    import tempfile
    import time
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with tempfile.TemporaryDirectory() as root:
        command = [str(Path(sys.executable).parent / "jupyter-lab"), "--no-browser", f"--port={port}", "--ip=127.0.0.1",
                   f"--ServerApp.root_dir={root}", "--IdentityProvider.token=", "--allow-root"]
        server = subprocess.Popen(["timeout", "300", *command], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(240):
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/lab", timeout=5).read()
                    break
                except OSError:
                    time.sleep(0.5)
            children = Path(f"/proc/{server.pid}/task/{server.pid}/children").read_text().split()
            return peak_mib(int(children[0]))
        finally:
            server.terminate()
            server.wait(timeout=30)


def main(paths: list[str]) -> None:
    notebooks = [Path(p) for p in paths] or shipped_notebooks()
    print(f"JupyterLab server, no kernel: peak {server_mib():.0f} MiB", flush=True)
    print(f"idle kernel (gptlib and torch imported): peak {run(None):.0f} MiB", flush=True)
    for path in notebooks:
        print(f"{path.name}: peak {run(path):.0f} MiB", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
