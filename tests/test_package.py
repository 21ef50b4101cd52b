"""Packaging promises: light import, one source of truth for dependencies."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
import yaml

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow  # a fresh interpreter or a training run
def test_import_gptlib_loads_neither_matplotlib_nor_the_widget_libraries():
    code = "import sys, gptlib; print(sorted(m for m in ('matplotlib', 'ipywidgets', 'anywidget') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120).stdout
    assert out.strip() == "[]"


def test_environment_yml_lists_the_pyproject_dependencies():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    from_pyproject = set(project["dependencies"])
    for extra in ("notebooks", "test", "course"):
        from_pyproject |= set(project["optional-dependencies"][extra])
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(item["pip"] for item in env["dependencies"] if isinstance(item, dict))
    from_env = {line for line in pip_section if not line.startswith("--")}
    assert from_env == from_pyproject
    python = next(item for item in env["dependencies"] if isinstance(item, str) and item.startswith("python="))
    minimum = re.search(r">=(\d+\.\d+)", project["requires-python"]).group(1)
    assert tuple(map(int, python.split("=")[1].split("."))) >= tuple(map(int, minimum.split(".")))
