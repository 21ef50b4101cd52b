"""Create or refresh the project's virtual environment, installing only what is missing.

    python3 tools/ensure_env.py [--venv .venv]
    python3 tools/ensure_env.py --chromium

Steps, each skipped when already done:
1. create the venv;
2. install a CPU build of torch, never a CUDA one: a local CPU wheel from pip's configured
   find-links if there is one, else PyTorch's CPU wheel index, else (macOS, Windows, whose
   PyPI wheels are CPU-only) PyPI; on Linux without either it stops and says why;
3. install gptlib editable with its notebook, test and course extras (pip adds only what is missing);
4. remove rfc3987-syntax again (SLOW_AND_UNUSED says why).
With --chromium it only installs Debian's Chromium for the browser tests (root and apt-get).
"""

from __future__ import annotations

import argparse
import glob
import os
import platform
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CPU_INDEX = "https://download.pytorch.org/whl/cpu"

# jupyter-events pulls this in through jsonschema's format-nongpl extra, and jsonschema imports it
# whenever it is installed, to check strings of the "iri" format. Its import builds 38 parsers: about
# 3 s of CPU in every process that reads a notebook (JupyterLab, Voila, nbval and each of its
# workers, the book build), where 0.3 s is the rest of nbformat. No schema installed here uses that
# format; without the package jsonschema would leave it unchecked.
SLOW_AND_UNUSED = "rfc3987-syntax"


def run(*cmd: str) -> bool:
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd).returncode == 0


def ensure_venv(path: Path) -> Path:
    python = path / "bin" / "python"
    if not python.exists():
        if sys.version_info < (3, 10):
            sys.exit(f"gptlib needs Python >= 3.10; this is {platform.python_version()}")
        print(f"creating virtual environment {path}", flush=True)
        venv.create(path, with_pip=True)
    return python


def local_cpu_torch_wheel(python: Path) -> str | None:
    """Version of a torch CPU wheel lying in pip's configured find-links folders, if any."""
    out = subprocess.run([str(python), "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    folders = [line.split("=", 1)[1].strip("'\" ") for line in out.splitlines() if "find-links" in line]
    for folder in folders:
        for wheel in sorted(glob.glob(os.path.join(folder.removeprefix("file://"), "torch-*+cpu-*.whl"))):
            return Path(wheel).name.split("-")[1].split("+")[0]
    return None


def ensure_cpu_torch(python: Path) -> None:
    if subprocess.run([str(python), "-c", "import torch"], capture_output=True).returncode == 0:
        return
    pip = (str(python), "-m", "pip", "install", "--quiet")
    version = local_cpu_torch_wheel(python)
    if version and run(*pip, f"torch=={version}"):
        return
    if run(*pip, "torch", "--index-url", CPU_INDEX, "--extra-index-url", "https://pypi.org/simple"):
        return
    if platform.system() != "Linux" and run(*pip, "torch"):
        return
    sys.exit(
        "could not install a CPU build of torch: no local CPU wheel and PyTorch's CPU index was "
        f"unreachable ({CPU_INDEX}). Install one by hand into {python.parent.parent}, then rerun."
    )


def ensure_chromium() -> None:
    if shutil.which("chromium"):
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        print("Chromium is missing: install Debian's 'chromium' package for the browser tests", flush=True)
        return
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "chromium"]):
        print("+", " ".join(cmd), flush=True)
        subprocess.run(cmd, env=env, check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", default=str(ROOT / ".venv"))
    parser.add_argument("--chromium", action="store_true", help="only install Chromium, for the browser tests")
    args = parser.parse_args()
    if args.chromium:
        return ensure_chromium()
    python = ensure_venv(Path(args.venv))
    ensure_cpu_torch(python)
    if not run(str(python), "-m", "pip", "install", "--quiet", "-e", f"{ROOT}[notebooks,test,course]"):
        sys.exit("pip could not install gptlib's dependencies (see above)")
    if subprocess.run([str(python), "-m", "pip", "show", "-q", SLOW_AND_UNUSED], capture_output=True).returncode == 0:
        run(str(python), "-m", "pip", "uninstall", "--quiet", "--yes", SLOW_AND_UNUSED)


if __name__ == "__main__":
    main()
