"""No module of the project replaces a name of a module it did not write (nbval, jupyter_client, torch,
the standard library, ...): a release of that package can break such a replacement silently, and it
holds for the whole process. Read from the source with `ast`: an assignment, `del`, `setattr` or
`delattr` whose target is reached from an imported foreign name (`torch.manual_seed = ...`,
`RunningKernel.await_reply = ...` after `from nbval.kernel import RunningKernel`), except the
attributes of `sys` that are there to be set (stdout, path, ...). pytest's
`monkeypatch`, which a test uses for a double and which undoes itself when the test ends, is not such
a replacement.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("gptlib", "course", "tests", "benchmarks", "tools", "book")


def sources() -> dict[str, str]:
    """{path relative to the root: source} of every Python module the scan reads."""
    paths = [ROOT / "conftest.py", *(path for folder in FOLDERS for path in sorted((ROOT / folder).rglob("*.py")))]
    return {str(path.relative_to(ROOT)): path.read_text() for path in paths if "vendor" not in path.parts}


# The project's own top-level modules: its folders, the course kit's package (course/gptlib_course), and
# files imported by name from beside them (tests/browser's `servers`, ...).
OWN = {*FOLDERS, "gptlib_course", *(Path(path).stem for path in sources())}


def foreign_names(tree: ast.Module) -> dict[str, str]:
    """{name bound in this module: the foreign module it came from} for every import, anywhere."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] not in OWN:
                    names[(alias.asname or alias.name).split(".")[0]] = alias.name
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module.split(".")[0] not in OWN:
            for alias in node.names:
                names[alias.asname or alias.name] = node.module
    return names


def root_name(node: ast.expr) -> str | None:
    """'torch' for torch.backends.x; None unless the expression is a chain of attributes on a name."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def replacements(path: str, source: str) -> list[str]:
    """'path:line: target' for every replacement of an attribute of a foreign name in `source`."""
    tree = ast.parse(source)
    foreign = foreign_names(tree)
    found = []
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, (ast.Assign, ast.Delete)):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr"):
            targets = [ast.Attribute(value=node.args[0], attr="...")] if node.args else []
        while any(isinstance(target, (ast.Tuple, ast.List)) for target in targets):  # a, b.c = ...
            targets = [part for target in targets for part in getattr(target, "elts", [target])]
        for target in targets:
            name = root_name(target) if isinstance(target, ast.Attribute) else None
            if name in foreign and foreign[name] != "sys":  # sys.stdout, sys.path, ... are there to be set
                found.append(f"{path}:{node.lineno}: {ast.unparse(target)} ({foreign[name]})")
    return found


def test_no_module_replaces_a_name_of_a_package_it_did_not_write():
    found = [line for path, source in sources().items() for line in replacements(path, source)]
    assert found == [], "\n".join(found)


def test_the_scan_finds_every_form_of_replacement_and_nothing_else():
    scratch = """
import torch, random
import nbval.kernel
from nbval.kernel import RunningKernel as Kernel
from gptlib import model
import servers

torch.manual_seed = lambda seed: None
random.Random.seed = None
nbval.kernel.start_new_kernel = None
Kernel.await_reply = None
setattr(torch.backends, "flag", 1)
del torch.Generator
model.GPT.extra = 1
servers.CHROMIUM = "x"
figure = object()
figure.dpi = 3
torch.arange(3)[0] = 1
import sys
sys.stdout, torch.e = None, 1
def f(monkeypatch):
    monkeypatch.setattr(torch, "save", None)
"""
    assert sorted(line.split(": ", 1)[1] for line in replacements("scratch.py", scratch)) == sorted([
        "torch.manual_seed (torch)", "random.Random.seed (random)", "nbval.kernel.start_new_kernel (nbval.kernel)",
        "Kernel.await_reply (nbval.kernel)", "torch.backends.... (torch)", "torch.Generator (torch)", "torch.e (torch)"])
