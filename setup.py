"""What pyproject.toml cannot say: the wheel carries the notebooks as the data folder gptlib/notebooks
(from notebooks/ in the repository), which `python -m gptlib notebooks DIR` copies out."""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["gptlib", "gptlib.*"]), "gptlib.notebooks"],
    package_dir={"gptlib.notebooks": "notebooks"},
)
