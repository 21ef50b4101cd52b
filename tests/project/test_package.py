"""Packaging promises: a light import, every imported package declared for the audience that uses it,
one list of dependencies (pyproject.toml; the course kit's in course/pyproject.toml), a requires-python
that holds, and the notebooks copied out by `python -m gptlib` without losing a learner's work."""

import ast
import importlib.metadata
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from gptlib import __main__ as command
from tools import ensure_env

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
EXTRAS = PROJECT["optional-dependencies"]
KIT = tomllib.loads((ROOT / "course" / "pyproject.toml").read_text())  # the instructor's course kit: gptlib_course
PACKAGES = (ROOT / "gptlib", ROOT / "course" / "gptlib_course")


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_names(requirements: list[str]) -> set[str]:
    """Distribution names in a list of requirements, this project's own extras expanded ("gptlib-lecture5[notebooks]")."""
    names = set()
    for requirement in requirements:
        name, extras = re.match(r"([A-Za-z0-9._-]+)(?:\[([^\]]*)\])?", requirement).groups()
        if normalized(name) == normalized(PROJECT["name"]):
            for extra in extras.split(","):
                names |= requirement_names(EXTRAS[extra.strip()])
        else:
            names.add(normalized(name))
    return names


def declared_for(module: str) -> set[str]:
    """What an environment has when `module` runs: the dependencies, plus the notebooks extra for the
    figures and explorers (gptlib.viz) and the student's half of the course kit (gptlib.assignment, in a
    released notebook's kernel), and the course kit's own list for the kit (gptlib_course)."""
    names = requirement_names(PROJECT["dependencies"])
    if module.startswith("gptlib_course"):  # it requires gptlib-lecture5 (the test below checks)
        return names | requirement_names(KIT["project"]["dependencies"])
    if module.startswith(("gptlib.viz", "gptlib.assignment")):
        names |= requirement_names(EXTRAS["notebooks"])
    if module == "gptlib.export":  # transformer-lens: installed by `make bench` with --no-deps (Makefile), as it says
        names |= requirement_names(EXTRAS["export"]) | {"transformer-lens"}
    return names


def third_party_imports(source: str) -> set[str]:
    """The top-level names of every absolute import in `source` (inside functions too), the standard library left out."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            found.add(node.module.split(".")[0])
    return {name for name in found if name not in sys.stdlib_module_names and name not in ("__main__", "gptlib", "gptlib_course")}


def undeclared_imports() -> list[str]:
    """'module imports X (distribution D), not declared for it' for every module of gptlib and the course
    kit; the import name is mapped to its distribution by the installed packages' own metadata (PIL -> Pillow)."""
    distributions = importlib.metadata.packages_distributions()
    problems = []
    paths = [path for package in PACKAGES for path in sorted(package.rglob("*.py"))]
    for path in paths:
        module = ".".join(path.relative_to(next(p for p in PACKAGES if path.is_relative_to(p)).parent).with_suffix("").parts)
        for name in sorted(third_party_imports(path.read_text())):
            dists = {normalized(d) for d in distributions.get(name, [])} or {normalized(name)}  # not installed
            if not dists & declared_for(module):
                provider = ", ".join(sorted(dists)) or "no installed distribution"
                problems.append(f"{module} imports {name} ({provider}), not declared for it")
    return problems


def test_every_package_gptlib_imports_is_declared_for_the_audience_that_runs_it():
    assert undeclared_imports() == []


def test_the_course_kit_is_a_package_of_its_own_on_top_of_the_learners_set():
    """course/pyproject.toml: gptlib_course alone (with its subpackage `inside`, each listed), needing gptlib with
    the notebooks extra (the zygote runs IPython) and JupyterHub; the root's wheel packages gptlib alone
    (tests/project/test_wheel.py reads it)."""
    kit = KIT["project"]
    packages = sorted(".".join(p.parent.relative_to(ROOT / "course").parts) for p in PACKAGES[1].rglob("__init__.py"))
    assert KIT["tool"]["setuptools"]["packages"] == packages == ["gptlib_course", "gptlib_course.inside"]
    assert "gptlib-lecture5[notebooks]" in kit["dependencies"] and "jupyterhub" in requirement_names(kit["dependencies"])
    assert kit["requires-python"] == PROJECT["requires-python"]
    assert not any("jupyterhub" in requirement_names(requirements) for requirements in EXTRAS.values())  # in one place


def test_the_import_scan_finds_what_it_must():
    source = "import os\nimport PIL.Image\ndef f():\n    from matplotlib import figure\nfrom . import x\n"
    assert third_party_imports(source) == {"PIL", "matplotlib"}
    assert "pillow" in declared_for("gptlib.viz.display") and "pillow" not in declared_for("gptlib.model")
    assert "jupyterhub" in declared_for("gptlib_course.judge") and "jupyterhub" not in declared_for("gptlib.assignment.grader")
    assert "ipython" in declared_for("gptlib.assignment.grader") and "voila" not in declared_for("gptlib_course.judge")


def test_make_test_installs_every_audience():
    audiences = set().union(*(requirement_names(EXTRAS[extra]) for extra in ("notebooks", "app", "book", "course")))
    assert requirement_names(EXTRAS["test"]) >= audiences
    assert ensure_env.editables(["test"])[-2:] == ["-e", str(ROOT / "course")]  # and the course kit, with its own list


def test_the_learner_set_leaves_out_the_other_audiences_tools():
    learner = requirement_names(PROJECT["dependencies"] + EXTRAS["notebooks"])
    assert not learner & {"voila", "sphinx", "jupyterhub", "pytest", "playwright", "transformers", "ruff"}


def test_requires_python_holds_for_every_python_file():
    minimum = tuple(map(int, re.fullmatch(r">=(\d+)\.(\d+)", PROJECT["requires-python"]).groups()))
    assert sys.version_info[:2] >= minimum
    files = [p for folder in ("gptlib", "course", "tests", "tools", "benchmarks") for p in (ROOT / folder).rglob("*.py")]
    for path in files:  # the grammar of the minimum version (tomllib, which tests use, is 3.11's)
        ast.parse(path.read_text(), str(path), feature_version=minimum)


def test_environment_yml_installs_the_package_itself_with_no_copied_list():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(item["pip"] for item in env["dependencies"] if isinstance(item, dict))
    requirements = [line for line in pip_section if not line.startswith("--")]
    assert requirements == ["-e .[notebooks]"]
    python = next(item for item in env["dependencies"] if isinstance(item, str) and item.startswith("python="))
    minimum = re.search(r">=(\d+\.\d+)", PROJECT["requires-python"]).group(1)
    assert tuple(map(int, python.split("=")[1].split("."))) >= tuple(map(int, minimum.split(".")))


@pytest.mark.slow  # a fresh interpreter
def test_import_gptlib_and_its_command_load_neither_matplotlib_nor_the_widget_libraries_nor_the_checkers():
    code = (
        "import runpy, sys; runpy.run_module('gptlib', run_name='not_main')\n"  # imports gptlib, then gptlib.__main__
        "print(sorted(m for m in ('matplotlib', 'ipywidgets', 'anywidget', 'IPython', 'gptlib.exercises') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120).stdout
    assert out.strip() == "[]"


def test_notebooks_command_copies_every_shipped_notebook(tmp_path):
    copies = command.copy_notebooks(tmp_path / "mine")
    assert [c.name for c in copies] == sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert all(c.read_bytes() == (ROOT / "notebooks" / c.name).read_bytes() for c in copies)
    assert command.copy_notebooks(tmp_path / "mine") == copies  # again: identical copies are no edit


def test_notebooks_command_keeps_a_learners_edits_unless_told(tmp_path, capsys):
    folder = tmp_path / "mine"
    first, second, *_ = command.copy_notebooks(folder)
    first.write_text("my work")
    second.unlink()
    with pytest.raises(SystemExit) as refused:
        command.main(["notebooks", str(folder)])
    assert first.name in str(refused.value) and "--overwrite" in str(refused.value)
    assert first.read_text() == "my work" and not second.exists()  # nothing copied
    assert command.main(["notebooks", str(folder), "--overwrite"]) == 0
    assert first.read_bytes() == (ROOT / "notebooks" / first.name).read_bytes() and second.exists()


def test_notebooks_command_refuses_a_file_as_folder(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(SystemExit, match="is not a folder"):
        command.copy_notebooks(tmp_path / "file")


def test_lab_command_serves_the_folder_on_localhost_only(tmp_path):
    cmd = command.jupyter_lab_command(tmp_path)
    assert cmd[:3] == [sys.executable, "-m", "jupyterlab"] and "--ip=127.0.0.1" in cmd
    assert f"--ServerApp.root_dir={tmp_path}" in cmd
