"""Create or refresh the project's virtual environment, installing only what is missing.

    python tools/ensure_env.py [--venv .venv] [--extras notebooks]   (make lab; make app, book, test: app, book, test)
    python tools/ensure_env.py --system-packages                      (Debian: Chromium, bubblewrap, npm for make test)

The same on Linux, macOS and Windows: the venv's own paths come from sysconfig's venv scheme, and
every step is a Python call or a process started without a shell. Steps, each skipped when done:
1. create the venv, with the newest pip the index offers;
2. install a CPU build of torch, never a CUDA one: a local CPU wheel from pip's configured
   find-links if there is one, else PyTorch's CPU wheel index, else (macOS, Windows, whose
   PyPI wheels are CPU-only) PyPI; on Linux without either it stops and says why;
3. install gptlib editable with the extras asked for (pip adds only what is missing): notebooks
   is the learner's set; app, book, course and test each add their audience's on top of it; course
   and test also install the instructor's course kit (course/: gptlib_course, with JupyterHub)
   editable, in the same pip call;
4. remove rfc3987-syntax again (SLOW_AND_UNUSED says why);
5. import what the notebooks' kernels and the grader's judges import, once: pip installs without
   compiling to bytecode, and this compiles those modules (PIP_INSTALL says why).
With --system-packages it only installs, where missing and possible (root and apt-get), the Debian
packages the tests need besides Python's: Chromium (browser tests), bubblewrap (the course kit's
sandbox) and npm (JupyterHub's proxy).
"""

from __future__ import annotations

import argparse
import glob
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MINIMUM_PYTHON = (3, 11)  # pyproject.toml's requires-python (tests/project/test_ensure_env.py keeps them equal)
EXTRAS = ("notebooks", "app", "book", "course", "test")
WITH_COURSE_KIT = ("course", "test")  # the extras that also install course/ (a package of its own: gptlib_course)
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
VENV_SCHEMES = {"posix": "posix_venv", "nt": "nt_venv"}  # sysconfig's layouts of a virtual environment
SYSTEM_PACKAGES = {"chromium": "chromium", "bwrap": "bubblewrap", "npm": "npm"}  # command -> Debian package

# jupyter-events pulls this in through jsonschema's format-nongpl extra, and jsonschema imports it
# whenever it is installed, to check strings of the "iri" format. Its import builds 38 parsers: about
# 3 s of CPU in every process that reads a notebook (JupyterLab, Voila, nbval and each of its
# workers, the book build), where 0.3 s is the rest of nbformat. No schema installed here uses that
# format; without the package jsonschema would leave it unchecked.
SLOW_AND_UNUSED = "rfc3987-syntax"

# pip compiles every module it installs to bytecode by default: for torch and the ~150 distributions of the
# test set, 15,000 modules, most of an install's time (torch alone: 60 s with it, 21 s without, on the 2-core
# AMD EPYC). Instead one process imports what the kernels and the grader's judges import, which compiles
# those modules and keeps them (__pycache__): a process that cannot write the environment (a judge in its
# sandbox sees it read-only) would otherwise compile them again at each start (torch: +7 s). Anything else
# is compiled and kept on its first import.
PIP_INSTALL = ("-m", "pip", "install", "--quiet", "--no-compile")
RUN_BY_KERNELS = ("torch", "numpy", "gptlib.exercises", "gptlib.viz", "matplotlib.pyplot", "ipykernel.kernelapp")
RUN_BY_JUDGES = ("gptlib_course.grade", "gptlib_course.inside.zygote")  # the course kit's


def run(*cmd: str) -> bool:
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd).returncode == 0


def venv_python(path: Path, os_name: str = os.name) -> Path:
    """The interpreter of the virtual environment at `path`: bin/python on POSIX, Scripts\\python.exe on Windows."""
    scripts = sysconfig.get_path("scripts", VENV_SCHEMES[os_name], vars={"base": str(path), "platbase": str(path)})
    return Path(scripts) / ("python.exe" if os_name == "nt" else "python")


def ensure_venv(path: Path) -> Path:
    """Create the venv where missing, with the newest pip the index offers: the one Python's ensurepip
    brings can be years older and slower (3.11's pip 23.2 takes 35 s of CPU to resolve the test set's 193
    distributions against a local index of ~160,000 files, pip 26.3 15 s, choosing the same versions, on
    the 2-core AMD EPYC). Where no newer pip can be had (offline), the bundled one does the same, slower."""
    python = venv_python(path)
    if not python.exists():
        print(f"creating virtual environment {path}", flush=True)
        venv.create(path, with_pip=True)
        if not run(str(python), *PIP_INSTALL, "--upgrade", "pip"):
            print("could not upgrade pip: going on with the one venv installed", flush=True)
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
    pip = (str(python), *PIP_INSTALL)
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


def ensure_system_packages() -> None:
    missing = [package for command, package in SYSTEM_PACKAGES.items() if not shutil.which(command)]
    if not missing:
        return
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or not shutil.which("apt-get"):
        print(f"missing Debian packages {', '.join(missing)}: the tests that need them skip (in CI they fail)", flush=True)
        return
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *missing]):
        print("+", " ".join(cmd), flush=True)
        subprocess.run(cmd, env=env, check=True)


def editables(extras: list[str]) -> list[str]:
    """pip's arguments for the project's own packages: gptlib with `extras`, and the course kit where an
    extra needs it (its requirement gptlib-lecture5[notebooks] is met by the gptlib beside it)."""
    kit = ["-e", str(ROOT / "course")] if set(extras) & set(WITH_COURSE_KIT) else []
    return ["-e", f"{ROOT}[{','.join(extras)}]", *kit]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, default=ROOT / ".venv")
    parser.add_argument("--extras", default="notebooks", help=f"comma-separated, from {', '.join(EXTRAS)} (default: notebooks)")
    parser.add_argument("--system-packages", action="store_true", help="only install the Debian packages the tests need")
    args = parser.parse_args()
    if args.system_packages:
        return ensure_system_packages()
    if sys.version_info < MINIMUM_PYTHON:
        sys.exit(f"gptlib needs Python >= {'.'.join(map(str, MINIMUM_PYTHON))}; this is {platform.python_version()}")
    extras = args.extras.split(",")
    if unknown := sorted(set(extras) - set(EXTRAS)):
        parser.error(f"--extras: unknown {', '.join(unknown)}; choose from {', '.join(EXTRAS)}")
    python = ensure_venv(args.venv)
    ensure_cpu_torch(python)
    if not run(str(python), *PIP_INSTALL, *editables(extras)):
        sys.exit("pip could not install gptlib's dependencies (see above)")
    if subprocess.run([str(python), "-m", "pip", "show", "-q", SLOW_AND_UNUSED], capture_output=True).returncode == 0:
        run(str(python), "-m", "pip", "uninstall", "--quiet", "--yes", SLOW_AND_UNUSED)
    kit = RUN_BY_JUDGES if set(extras) & set(WITH_COURSE_KIT) else ()
    if not run(str(python), "-c", "import " + ", ".join((*RUN_BY_KERNELS, *kit))):
        sys.exit("the environment was installed but importing gptlib in it failed (see above)")


if __name__ == "__main__":
    main()
