"""What pyproject.toml cannot say: the wheel carries the notebooks as the data folder gptlib/notebooks
(from notebooks/ in the repository), which `python -m gptlib notebooks DIR` copies out. Data folders
without an __init__.py (checkpoints/, viz/js/) are listed as namespace packages, so that their files
(package-data in pyproject.toml) belong to a listed package."""

from setuptools import find_namespace_packages, setup

setup(
    packages=[*find_namespace_packages(include=["gptlib", "gptlib.*"], exclude=["*__pycache__"]), "gptlib.notebooks"],
    package_dir={"gptlib.notebooks": "notebooks"},
)
