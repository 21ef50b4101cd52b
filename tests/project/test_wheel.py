"""The learner's pip path, end to end: build the wheel from the sources a release holds, let pip's
resolver say what installing it with the notebooks extra brings into a fresh virtual environment, give
that environment exactly those distributions, copy the notebooks out with `python -m gptlib notebooks
DIR`, and let nbval run one there, its kernel that environment's Python.

Installing the set (torch and about 120 more) would take minutes of CPU, so each distribution pip
chose that this test's environment already holds at the same version is linked file by file (its
RECORD's files under site-packages) into the fresh one; pip installs the wheel and any other without
dependencies. The fresh environment holds what pip would install and nothing else: a dependency the
wheel does not declare, or a file it does not carry, is missing there too.

torch comes from a local CPU wheel (pip's configured find-links): without one the resolver would
look for torch on the index, so the test skips (in CI it fails).
A second, small test reads the wheel's file list: gptlib alone, none of the instructor's course kit
(course/, gptlib_course).
"""

import json
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from tools.ensure_env import local_cpu_torch_wheel, venv_python

ROOT = Path(__file__).resolve().parents[2]
RELEASED = ("pyproject.toml", "setup.py", "README.md", "gptlib", "notebooks")  # what building the wheel may read
NOTEBOOK = "08_trained_model_tour.ipynb"  # loads both shipped checkpoints: the package data must be found


def run(cmd: list, cwd: Path, timeout: int) -> str:
    """Run outside the repository: no PYTHONPATH, so only what was installed can be imported."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{cmd[:4]} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def linked(name: str, version: str, site: Path) -> bool:
    """Link the files under site-packages of distribution `name` of this environment into `site`, if it
    holds that `version`; say whether it did."""
    try:
        here = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return False
    if here.version != version or here.files is None:  # None: no RECORD to link by
        return False
    for file in here.files:
        if ".." not in file.parts:  # scripts and share/ lie beside site-packages: nbval needs none of them
            (site / file).parent.mkdir(parents=True, exist_ok=True)
            (site / file).symlink_to(here.locate_file(file))
    return True


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_fresh_environment_gets_a_working_companion_from_the_wheel_alone(tmp_path):
    torch_version = local_cpu_torch_wheel(Path(sys.executable))
    if torch_version is None:
        if os.environ.get("CI"):
            pytest.fail("no local CPU torch wheel in pip's find-links")
        pytest.skip("no local CPU torch wheel in pip's find-links: the install would download torch")
    source = tmp_path / "source"
    source.mkdir()
    for name in RELEASED:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
        else:
            shutil.copy(ROOT / name, source / name)
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", tmp_path / "dist", source], tmp_path, 600)
    (wheel,) = (tmp_path / "dist").glob("gptlib_lecture5-*.whl")

    venv.create(tmp_path / "env", symlinks=True)  # no pip: nothing in it but what follows
    python = venv_python(tmp_path / "env")
    pip = [sys.executable, "-m", "pip", "--python", python, "install", "--quiet"]
    asked = [f"torch=={torch_version}", f"{wheel}[notebooks]", "nbval"]
    run([*pip, "--dry-run", "--report", tmp_path / "report.json", *asked], tmp_path, 600)
    chosen = {item["metadata"]["name"]: item["metadata"]["version"]
              for item in json.loads((tmp_path / "report.json").read_text())["install"]}
    site = Path(run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], tmp_path, 60).strip())
    del chosen["gptlib-lecture5"]  # the wheel itself, installed below
    to_install = [f"{name}=={version}" for name, version in chosen.items() if not linked(name, version, site)]
    run([*pip, "--no-deps", wheel, *to_install], tmp_path, 600)
    installed = run([python, "-c", "import gptlib; print(gptlib.__file__)"], tmp_path, 120)
    assert Path(installed.strip()).is_relative_to(tmp_path / "env")  # the wheel's gptlib, not the repository's

    out = run([python, "-m", "gptlib", "notebooks", tmp_path / "mine"], tmp_path, 120)
    shipped = len(list((ROOT / "notebooks").glob("[0-9]*.ipynb")))
    assert f"{shipped} notebooks" in out and (tmp_path / "mine" / NOTEBOOK).exists()
    (tmp_path / "mine" / "pytest.ini").write_text("[pytest]\n")  # nothing from the repository's configuration
    shutil.copy(ROOT / "tests" / "nbval_sanitize.cfg", tmp_path / "mine")
    out = run([python, "-m", "pytest", "--nbval", "--nbval-current-env", "--nbval-sanitize-with", "nbval_sanitize.cfg",
               "--nbval-cell-timeout=300", "-p", "no:cacheprovider", "-q", NOTEBOOK], tmp_path / "mine", 900)
    assert " passed" in out and "failed" not in out


@pytest.mark.slow
def test_the_wheel_holds_gptlib_and_none_of_the_course_kit(tmp_path):
    """Built (no dependency, no isolated build environment: seconds) from the release's files and course/ beside
    them, as in the repository: the wheel's Python modules are gptlib's; of the course kit only the student's half,
    gptlib/assignment (grader, the test files' format, hidden variants' seeds), with no judge, sandbox or assignment builder."""
    source = tmp_path / "source"
    source.mkdir()
    for name in (*RELEASED, "course"):
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy(ROOT / name, source / name)
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet", "-w", tmp_path / "dist", source],
        tmp_path, 300)
    (wheel,) = (tmp_path / "dist").glob("gptlib_lecture5-*.whl")
    modules = [name for name in zipfile.ZipFile(wheel).namelist() if name.endswith(".py")]
    assert {name.split("/")[0] for name in modules} == {"gptlib"}
    released_kernel_needs = {"gptlib/checking/sealed.py", "gptlib/exercises/concepts.py"}  # a release's concept checks
    assert released_kernel_needs <= set(modules)
    assert sorted(n.split("/")[-1] for n in modules if n.startswith("gptlib/assignment/")) == [
        "__init__.py", "cases.py", "grader.py"]
    kit = {path.name for path in (ROOT / "course" / "gptlib_course").rglob("*.py")} - {"__init__.py", "__main__.py"}
    assert {"judge.py", "sandbox.py", "assign.py", "gradebook.py", "zygote.py", "remote_module.py"} <= kit
    assert not [name for name in modules if name.split("/")[-1] in kit]
