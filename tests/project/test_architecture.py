"""ARCHITECTURE.md: its table of layers places every gptlib module and names no module that is not
there; the layer rule holds for every import in gptlib, read from the source, and the grading kit
(gptlib_course) sits above gptlib; every name the symbol index cites is importable, every notebook it
cites exists."""

import ast
import functools
import importlib
import re
from pathlib import Path

import pytest

from tests.support.notebook_files import NOTEBOOKS

ROOT = Path(__file__).resolve().parents[2]
TEXT = (ROOT / "ARCHITECTURE.md").read_text()
NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")
PLOTTING = ("matplotlib", "ipywidgets")  # imported by the viz layer only


def layer_table(text: str = TEXT) -> dict[str, str]:
    """ARCHITECTURE.md's table of layers, first layer first: {entry: its layer}. An entry is a module or
    package relative to gptlib (`__init__` is gptlib itself); it holds everything below it."""
    block = text[text.index("## Layers"):].split("```")[3]
    return {entry: row.split()[0] for row in block.strip().splitlines() for entry in row.split()[1:]}


TABLE = layer_table()
LAYERS = tuple(dict.fromkeys(TABLE.values()))  # each imports only its own layer and those to its left


def entry(module: str, table: dict[str, str] = TABLE) -> str | None:
    """The table's entry a gptlib module falls under: the longest that is it or a package above it."""
    name = module.removeprefix("gptlib.") if module != "gptlib" else "__init__"
    return max((e for e in table if name == e or name.startswith(e + ".")), key=len, default=None)


def layer(module: str, table: dict[str, str] = TABLE) -> str:
    """The layer of a gptlib module, as the table places it."""
    return table[entry(module, table)]


def package_sources(package: Path = ROOT / "gptlib") -> dict[str, str]:
    """{module name: its source} for every .py file of a package ('gptlib.viz' for gptlib/viz/__init__.py)."""
    sources = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        sources[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path.read_text()
    return sources


def imported(module: str, source: str, modules) -> list[tuple[str, str | None]]:
    """(module, name) of every import in `module`'s source (inside functions too), the module resolved against
    its package for a relative import: ("torch", None) for `import torch`, ("gptlib.checking", "Wrong") for
    `from ..checking import Wrong` in gptlib.exercises.cost."""
    is_package = any(other.startswith(module + ".") for other in modules)
    return list(_imported(module, source, is_package))


@functools.cache  # the tests below ask about the same sources a thousand times: parse each once
def _imported(module: str, source: str, is_package: bool) -> tuple[tuple[str, str | None], ...]:
    package = module.split(".") if is_package else module.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module
            if node.level:  # from . import x (level 1: this package), from .. import x (its parent), ...
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            found += [(base, alias.name) for alias in node.names]
    return tuple(found)


def imports(module: str, source: str, modules) -> set[str]:
    """Every module `module` imports, anywhere in its source (inside functions too), resolved:
    relative imports against its package, and `from package import name` to the submodule name
    when `modules` holds one."""
    return {base if name is None or f"{base}.{name}" not in modules else f"{base}.{name}"
            for base, name in imported(module, source, modules)}


SOURCES = package_sources()
KIT_SOURCES = package_sources(ROOT / "course" / "gptlib_course")  # the instructor's course kit, its own package


def back_edges(sources: dict[str, str]) -> list[str]:
    """The imports that break the layer rule, that bring plotting outside the viz layer, or that name a
    gptlib module that is not there (an import left behind by a move)."""
    broken = []
    for module, source in sources.items():
        for target in sorted(imports(module, source, sources)):
            if target.split(".")[0] == "gptlib" and target not in sources:
                broken.append(f"{module} imports {target}, not a module of gptlib")
            elif target.split(".")[0] == "gptlib" and LAYERS.index(layer(target)) > LAYERS.index(layer(module)):
                broken.append(f"{module} ({layer(module)}) imports {target} ({layer(target)})")
            if target.split(".")[0] in PLOTTING and layer(module) != "viz":
                broken.append(f"{module} ({layer(module)}) imports {target}, which only viz may")
    return sorted(broken)


def test_no_module_imports_a_layer_to_its_right():
    assert LAYERS == ("config", "model", "checking", "analysis", "viz")
    assert back_edges(SOURCES) == []


def unplaced(sources: dict[str, str], table: dict[str, str]) -> list[str]:
    """Modules the table places in no layer, and entries of the table that name no module of gptlib."""
    missing = [f"{module} is in no layer" for module in sources if entry(module, table) is None]
    names = {module.removeprefix("gptlib.") if module != "gptlib" else "__init__" for module in sources}
    return sorted(missing + [f"{e} names no module" for e in table if e not in names])


def test_the_table_of_layers_places_every_module_and_names_only_modules_that_exist():
    assert unplaced(SOURCES, TABLE) == []
    assert layer("gptlib.analysis.layernorm") == "analysis" and layer("gptlib.train.own_model") == "model"
    assert layer("gptlib.train.__main__") == "analysis" and layer("gptlib.viz.decomposition") == "viz"
    scratch = {name: source for name, source in SOURCES.items() if name != "gptlib.data"} | {"gptlib.scratch": ""}
    assert unplaced(scratch, TABLE) == ["data names no module", "gptlib.scratch is in no layer"]


def kit_edges(sources: dict[str, str], kit: dict[str, str]) -> list[str]:
    """Imports that break the course kit's place above gptlib: a gptlib module importing gptlib_course
    (a student's environment has gptlib alone), or the kit importing a gptlib module that does not exist."""
    broken = []
    for module, source in sources.items():
        broken += [f"{module} imports {target}" for target in sorted(imports(module, source, sources))
                   if target.split(".")[0] == "gptlib_course"]
    for module, source in kit.items():
        targets = sorted(imports(module, source, sources | kit))
        broken += [f"{module} imports {target}, not a module of gptlib" for target in targets
                   if target.split(".")[0] == "gptlib" and target not in sources]
    return sorted(broken)


def test_the_course_kit_imports_gptlib_and_gptlib_never_imports_it():
    assert "gptlib_course.judge" in KIT_SOURCES and "gptlib.assignment.grader" in SOURCES  # the two halves, found
    assert "gptlib.assignment.cases" in imports("gptlib_course.judge", KIT_SOURCES["gptlib_course.judge"], SOURCES | KIT_SOURCES)
    assert kit_edges(SOURCES, KIT_SOURCES) == []


def test_the_kit_check_catches_gptlib_importing_the_kit_and_the_kit_importing_what_is_not_there():
    scratch = SOURCES | {"gptlib.assignment.grader": SOURCES["gptlib.assignment.grader"] + "\nfrom gptlib_course import judge\n"}
    kit = KIT_SOURCES | {"gptlib_course.scratch": "from gptlib.assignment import cases\n"
                                                  "from gptlib.assignment.assign import build\n"}
    assert kit_edges(scratch, kit) == [
        "gptlib.assignment.grader imports gptlib_course",
        "gptlib_course.scratch imports gptlib.assignment.assign, not a module of gptlib",
    ]



def inside_edges(kit: dict[str, str]) -> list[str]:
    """Imports of what runs inside the sandbox (gptlib_course.inside, the one package of the kit the sandbox holds)
    that reach the kit's host side, which the sandbox does not hold."""
    inside = {m: s for m, s in kit.items() if m == "gptlib_course.inside" or m.startswith("gptlib_course.inside.")}
    return sorted(f"{module} imports {target}" for module, source in inside.items() for target in imports(module, source, kit)
                  if target.split(".")[0] == "gptlib_course" and target not in inside)


def test_what_runs_inside_the_sandbox_imports_nothing_of_the_host_side():
    assert {"gptlib_course.inside.zygote", "gptlib_course.inside.remote_module"} <= set(KIT_SOURCES)
    assert "gptlib_course.inside.remote_module" in imports(  # the host side imports from inside, not the other way
        "gptlib_course.remote_module", KIT_SOURCES["gptlib_course.remote_module"], KIT_SOURCES)
    assert inside_edges(KIT_SOURCES) == []
    zygote = KIT_SOURCES["gptlib_course.inside.zygote"]
    scratch = KIT_SOURCES | {"gptlib_course.inside.zygote": zygote + "\nfrom ..judge import Limits\nfrom .. import sandbox\n"}
    assert inside_edges(scratch) == ["gptlib_course.inside.zygote imports gptlib_course.judge",
                                     "gptlib_course.inside.zygote imports gptlib_course.sandbox"]

def test_the_checking_package_maps_every_module_it_holds_and_no_other():
    package = importlib.import_module("gptlib.checking")
    files = {module.removeprefix("gptlib.checking.") for module in SOURCES if module.startswith("gptlib.checking.")}
    assert listed_modules(package.__doc__) == files


def analyses_judging(sources: dict[str, str]) -> list[str]:
    """Imports of the checkers' machinery by the analyses, which measure the model and judge no learner."""
    return sorted(f"{module} imports {target}" for module, source in sources.items() if module.startswith("gptlib.analysis")
                  for target in imports(module, source, sources) if target.startswith("gptlib.checking"))


def test_the_analyses_never_import_the_checking_machinery():
    assert analyses_judging(SOURCES) == []
    scratch = SOURCES | {"gptlib.analysis.cost": SOURCES["gptlib.analysis.cost"] + "\nfrom ..checking import close\n"}
    assert analyses_judging(scratch) == ["gptlib.analysis.cost imports gptlib.checking"]


def owner(module: str) -> str:
    """The package a module belongs to, for the rule on private names: in gptlib, a folder directly under gptlib/
    with everything below it ('gptlib.exercises' for gptlib.exercises.build_track.gpt), a module directly in
    gptlib/ ('gptlib.model') or gptlib's own __init__ ('gptlib'); elsewhere, the top-level folder
    ('gptlib_course', 'tests', 'benchmarks')."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "gptlib" else parts[0]


def private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))  # __main__, __version__ are not


def private_imports(sources: dict[str, str]) -> list[str]:
    """Imports of a private (underscore) name of gptlib, a module's or one of its attributes, from another package
    than the one that owns it. `sources` holds the importers and every gptlib module (to resolve relative imports)."""
    broken = []
    for module, source in sources.items():
        for base, name in imported(module, source, sources):
            target = base if name is None else f"{base}.{name}"
            if target.split(".")[0] == "gptlib" and any(map(private, target.split("."))) and owner(target) != owner(module):
                broken.append(f"{module} imports {target}, private to {owner(target)}")
    return sorted(broken)


EVERY_SOURCE = SOURCES | KIT_SOURCES | package_sources(ROOT / "benchmarks") | package_sources(ROOT / "tests")


def test_no_import_takes_a_private_name_of_gptlib_across_packages():
    assert {module.split(".")[0] for module in EVERY_SOURCE} == {"gptlib", "gptlib_course", "benchmarks", "tests"}
    assert private_imports(EVERY_SOURCE) == []


def test_the_private_name_check_catches_every_form_of_import_across_packages_and_allows_one_inside():
    scratch = EVERY_SOURCE | {
        "gptlib.adoption": SOURCES["gptlib.adoption"] + "\nfrom .checking.running import _LIBRARIES\n",
        "gptlib.exercises.build_track.gpt": "from ...checking import _secret\nfrom ..concepts import _RELEASED\n",
        "gptlib_course.inside.zygote": "import gptlib.checking._hidden\nfrom gptlib.checking import sealed\n",
        "tests.test_scratch": "from gptlib.exercises.concepts import _answers, check_concept\n",
        "benchmarks.scratch": "from gptlib.train.__main__ import main\n",
    }
    assert private_imports(scratch) == [
        "gptlib.adoption imports gptlib.checking.running._LIBRARIES, private to gptlib.checking",
        "gptlib.exercises.build_track.gpt imports gptlib.checking._secret, private to gptlib.checking",
        "gptlib_course.inside.zygote imports gptlib.checking._hidden, private to gptlib.checking",
        "tests.test_scratch imports gptlib.exercises.concepts._answers, private to gptlib.exercises",
    ]


def test_the_layer_check_resolves_every_form_of_import_and_catches_back_edges():
    assert {"gptlib.config", "gptlib.validation"} <= imports("gptlib.model", SOURCES["gptlib.model"], SOURCES)
    scratch = SOURCES | {
        "gptlib.model": SOURCES["gptlib.model"] + "\nfrom .analysis import layernorm\n",
        "gptlib.data": SOURCES["gptlib.data"] + "\nfrom . import model\n",  # plumbing sits in its layer too
        "gptlib.exercises.scratch": "from .. import validation\nfrom ..viz import attention\n",
        "gptlib.analysis.counting": SOURCES["gptlib.analysis.counting"] + "\ndef f():\n    import matplotlib.pyplot\n",
        "gptlib.viz.cost": SOURCES["gptlib.viz.cost"] + "\nfrom ..cost import TokenTimes\n",  # the old place
    }
    assert imports("gptlib.exercises.scratch", scratch["gptlib.exercises.scratch"], scratch) == {
        "gptlib.validation", "gptlib.viz.attention"}
    assert back_edges(scratch) == [
        "gptlib.analysis.counting (analysis) imports matplotlib.pyplot, which only viz may",
        "gptlib.data (config) imports gptlib.model (model)",
        "gptlib.exercises.scratch (analysis) imports gptlib.viz.attention (viz)",
        "gptlib.model (model) imports gptlib.analysis.layernorm (analysis)",
        "gptlib.viz.cost imports gptlib.cost, not a module of gptlib",
    ]


def cited_names():
    """`module.name` spans of the index (a call's arguments dropped), as gptlib.<module> and an attribute path."""
    names = set()
    for span in re.findall(r"`([^`]+)`", TEXT[TEXT.index("## Symbol index"):]):
        span = re.sub(r"\(.*\)$", "", span).removeprefix("gptlib.")
        if NAME.fullmatch(span) and not span.endswith((".md", ".py")):
            names.add(span)
    return sorted(names)


def resolve(name):
    """A cited name's object: relative to gptlib.analysis when its first part is an analysis module, else to gptlib."""
    parts = name.split(".")
    package = "gptlib.analysis." if f"gptlib.analysis.{parts[0]}" in SOURCES else "gptlib."
    for split in range(len(parts), 0, -1):  # the longest prefix that is a module (the whole name, for a module)
        try:
            obj = importlib.import_module(package + ".".join(parts[:split]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[split:]:
            obj = getattr(obj, attribute)
        return obj
    raise ModuleNotFoundError(f"no gptlib module for {name}")


def test_the_index_cites_names_from_every_layer():
    names = cited_names()
    assert len(names) > 40
    examples = {"attention.W_QK", "counting.theorem_5_2", "model.GPT.embed", "viz.residual.init_variance_figure"}
    assert examples <= set(names)
    assert resolve("attention.W_QK").__module__ == "gptlib.analysis.attention"


@pytest.mark.parametrize("name", cited_names())
def test_every_cited_name_is_importable(name):
    if name.startswith("viz."):
        pytest.importorskip("matplotlib")
        pytest.importorskip("ipywidgets")
    assert resolve(name) is not None


def test_every_cited_notebook_exists():
    index = TEXT[TEXT.index("## Symbol index"):]
    rows = [line for line in index.splitlines() if line.startswith("| ")]
    in_table = {n for row in rows for n in re.findall(r"\b\d\d\b", row.split("|")[-2])}
    in_figures = set(re.findall(r"\b\d\d\b", index[index.index("Figures and widgets"):]))
    cited, numbered = in_table | in_figures, {path.name[:2] for path in NOTEBOOKS}
    assert cited == numbered, f"cited but missing: {sorted(cited - numbered)}, not indexed: {sorted(numbered - cited)}"


def test_the_training_loop_imports_no_task_only_its_command_line_does():
    assert "gptlib.analysis.induction" not in imports("gptlib.train", SOURCES["gptlib.train"], SOURCES)
    assert "gptlib.analysis.induction" in imports("gptlib.train.__main__", SOURCES["gptlib.train.__main__"], SOURCES)


def analysis_rows() -> list[list[str]]:
    """ARCHITECTURE.md's order inside the analysis layer: its rows of module names, first row first."""
    block = TEXT[TEXT.index("Inside the layer, each row below"):].split("```")[1]
    return [line.split() for line in block.strip().splitlines()]


def unit(module: str, rows: list[list[str]]) -> str | None:
    """The row entry a gptlib module falls under: the longest listed name that is it or a package above it
    (an analysis module is listed by its own name)."""
    name = module.removeprefix("gptlib.analysis.").removeprefix("gptlib.")
    listed = [entry for row in rows for entry in row if name == entry or name.startswith(entry + ".")]
    return max(listed, key=len, default=None)


def order_breaks(sources: dict[str, str], rows: list[list[str]]) -> list[str]:
    """Imports inside the analysis layer that do not go to an earlier row, and analysis modules in no row."""
    row_of = {entry: i for i, row in enumerate(rows) for entry in row}
    broken = []
    for module, source in sources.items():
        if module in ("gptlib", "gptlib.analysis") or layer(module) != "analysis":  # the packages' own files
            continue
        here = unit(module, rows)
        if here is None:
            broken.append(f"{module} is in no row of the analysis layer's order")
            continue
        for target in sorted(imports(module, source, sources)):
            there = unit(target, rows) if target.startswith("gptlib.") else None
            if there is not None and there != here and row_of[there] >= row_of[here]:
                broken.append(f"{module} (row {row_of[here] + 1}) imports {target} (row {row_of[there] + 1})")
    return broken


def test_inside_the_analysis_layer_each_row_imports_only_the_rows_above_it():
    assert order_breaks(SOURCES, analysis_rows()) == []


def test_the_order_check_catches_an_import_up_or_across_and_a_module_left_out():
    rows = analysis_rows()
    assert rows[0][0] == "positionwise" and rows[5] == ["assignment"]  # the rows the scratch cases name
    scratch = SOURCES | {
        "gptlib.analysis.cache": SOURCES["gptlib.analysis.cache"] + "\nfrom . import jacobians\n",  # up
        "gptlib.analysis.cost": SOURCES["gptlib.analysis.cost"] + "\nfrom . import residual\n",  # across one row
        "gptlib.analysis.scratch": "from .. import data\n",  # in no row
        "gptlib.exercises.extra": "from . import result\nfrom .. import assignment\n",  # its own package, then up
    }
    assert sorted(order_breaks(scratch, rows)) == [
        "gptlib.analysis.cache (row 1) imports gptlib.analysis.jacobians (row 2)",
        "gptlib.analysis.cost (row 2) imports gptlib.analysis.residual (row 2)",
        "gptlib.analysis.scratch is in no row of the analysis layer's order",
        "gptlib.exercises.extra (row 5) imports gptlib.assignment (row 6)",
    ]


def listed_modules(docstring: str) -> set[str]:
    """The first word of each line of a package docstring's map (lines indented by four spaces)."""
    return {line.split()[0] for line in docstring.splitlines() if line.startswith("    ") and line.strip()}


def test_the_analysis_package_maps_every_module_it_holds_and_no_other():
    package = importlib.import_module("gptlib.analysis")
    files = {module.removeprefix("gptlib.analysis.") for module in SOURCES if module.startswith("gptlib.analysis.")}
    assert listed_modules(package.__doc__) == files
    assert listed_modules("    cache  x\n    missing  y\n") - files == {"missing"}  # a stale line would show


def in_support(name: str) -> bool:
    return name.split(".")[:2] == ["tests", "support"]


def outside_support(module: str, source: str, modules) -> list[str]:
    """What `module` imports that the shared test machinery may not be built on: a benchmark or a test module."""
    return sorted(name for name in imports(module, source, modules)
                  if name.split(".")[0] == "benchmarks" or (name.split(".")[0] == "tests" and not in_support(name)))


def test_the_test_machinery_is_shared_one_way():
    """What the tests and the benchmarks share (the synthetic class, the browser driver and servers) has one
    copy, in tests/support: it imports neither a benchmark nor a test module, and a benchmark takes from
    tests/ only tests.support, so neither side reaches into the other's files and no import goes in a circle."""
    support = {f"tests.{module}": source for module, source in package_sources(ROOT / "tests" / "support").items()}
    benchmarks = package_sources(ROOT / "benchmarks")
    assert "tests.support.course_class" in support and "tests.support.browser.servers" in support
    grading = benchmarks["benchmarks.course_grading"]
    assert "tests.support.course_class" in imports("benchmarks.course_grading", grading, support)
    assert {module: names for module, source in support.items() if (names := outside_support(module, source, support))} == {}
    reached = {module: [name for name in imports(module, source, benchmarks) if name.split(".")[0] == "tests"]
               for module, source in benchmarks.items()}
    assert {module: names for module, names in reached.items() if not all(map(in_support, names))} == {}
    scratch = "from benchmarks import peers\nfrom tests.course import test_assign\n"
    assert outside_support("tests.support.x", scratch, support) == ["benchmarks", "tests.course"]  # it sees both edges
    path_edits = {module for module, source in benchmarks.items() for node in ast.walk(ast.parse(source))
                  if isinstance(node, ast.Attribute) and node.attr == "path" and getattr(node.value, "id", None) == "sys"}
    assert path_edits == set()  # sys.path in code, not in the text of a hostile submission
