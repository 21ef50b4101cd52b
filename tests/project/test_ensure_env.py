"""tools/ensure_env.py: the same installer on POSIX and Windows, its paths from sysconfig, and its
rules in step with pyproject.toml."""

import tomllib
import venv
from pathlib import Path

import pytest

from tools import ensure_env

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


@pytest.mark.parametrize("os_name, expected", [
    ("posix", "/work/gpt/.venv/bin/python"),
    ("nt", "/work/gpt/.venv/Scripts/python.exe"),
])
def test_the_venv_interpreter_on_each_platform(os_name, expected):
    assert ensure_env.venv_python(Path("/work/gpt/.venv"), os_name).as_posix() == expected


def test_the_venv_interpreter_here_is_where_the_standard_library_puts_it(tmp_path):
    context = venv.EnvBuilder().ensure_directories(tmp_path / "env")  # makes folders only, no interpreter
    assert ensure_env.venv_python(tmp_path / "env") == Path(context.env_exe)


def test_the_installer_needs_the_python_pyproject_requires():
    assert PROJECT["requires-python"] == ">=" + ".".join(map(str, ensure_env.MINIMUM_PYTHON))


def test_the_installer_offers_every_extra_but_the_benchmarks_and_the_export():
    # bench is make bench's own; export (transformers, for gptlib.export) comes with test and is a pip extra only
    assert set(ensure_env.EXTRAS) == set(PROJECT["optional-dependencies"]) - {"bench", "export"}


def test_the_course_kit_is_installed_for_the_course_and_test_extras_only():
    kit = ["-e", str(ROOT / "course")]
    assert ensure_env.editables(["course"]) == ["-e", f"{ROOT}[course]", *kit]
    assert ensure_env.editables(["notebooks", "test"]) == ["-e", f"{ROOT}[notebooks,test]", *kit]
    assert all(ensure_env.editables([extra]) == ["-e", f"{ROOT}[{extra}]"] for extra in ("notebooks", "app", "book"))
