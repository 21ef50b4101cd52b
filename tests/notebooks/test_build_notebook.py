"""Notebook 09 as committed: every build step's stub is untouched, so each checker reads "not attempted yet",
the cells that use the learner's whole model skip with the same words, and nothing trains."""

import ast
import contextlib
import io
import math
import re
from pathlib import Path

import pytest
import torch

from gptlib import exercises
from gptlib.exercises import build_track, hints
from tests.support.notebook_files import cells, notebook, texts

CHECKS = ["build_track.check_layer_norm_module(LayerNorm)", "build_track.check_attention_head(AttentionHead)",
          "build_track.check_multi_head_attention(MultiHeadAttention)", "build_track.check_mlp(MLP)",
          "build_track.check_block(Block)",
          "build_track.check_gpt(GPT)", "build_track.check_init(init_weights, GPT)", "build_track.attempt(course_gpt)"]


def test_each_step_reads_not_attempted_in_order_with_its_hints_behind_a_comment():
    nb = cells(notebook("09"))
    found = [next(i for i, c in enumerate(nb) if c.cell_type == "code" and check in c.source) for check in CHECKS]
    assert found == sorted(found)
    for i in found:
        shown = [text for output in nb[i].outputs for text in texts(output)]
        assert shown and all("not attempted yet" in text for text in shown), nb[i].source
    steps = [n for c in nb if c.cell_type == "markdown" for n in re.findall(r"^## Step (\d+)", c.source, re.M)]
    assert steps == [str(k) for k in range(1, 11)]
    hidden = [c.source for c in nb if c.cell_type == "code" and "exercises.show_solution(" in c.source]
    assert len(hidden) == 7 and all(line.startswith("#") for s in hidden for line in s.splitlines() if "exercises." in line)


def test_the_training_cell_skips_and_says_why():
    nb = cells(notebook("09"))
    cell = next(c for c in nb if c.cell_type == "code" and "train_on_shakespeare(mine)" in c.source)
    shown = [text for output in cell.outputs for text in texts(output)]
    assert shown and all("not attempted yet" in text for text in shown)


def step_10_cells() -> list:
    nb = cells(notebook("09"))
    start = next(i for i, c in enumerate(nb) if c.cell_type == "markdown" and c.source.startswith("## Step 10"))
    return [c for c in nb[start + 1 : start + 3] if c.cell_type == "code"]


def test_step_10_as_committed_says_there_is_nothing_of_yours_yet():
    shown = [text for cell in step_10_cells() for output in cell.outputs for text in texts(output)]
    assert "not attempted yet" in "".join(shown) and "nothing of yours to open yet" in shown[-1]


@pytest.mark.parametrize("trained", [False, True], ids=["fresh", "trained"])
def test_step_10_opens_a_learners_model_beside_the_course_model(trained):
    # the reference solutions in place of the stubs; "trained" stands for Step 9's `mine` (training is not rerun)
    from gptlib.exercises.answers import build as S

    shown = []
    namespace = _setup_namespace() | {"display": lambda *widgets: shown.extend(widgets), "trained": trained}
    namespace["course_gpt"] = lambda: S.init_weights(S.GPT(65, 64, 128, 4, 4, 512))
    namespace["mine"] = namespace["course_gpt"]() if trained else None
    printed = "".join(_printed(exec, compile(cell.source, "09 Step 10", "exec"), namespace) for cell in step_10_cells())
    assert ("has not trained" in printed) != trained and "not attempted" not in printed
    assert "  yours: z_e - z_o = " in printed and " course: z_e - z_o = " in printed
    assert [type(w).__name__ for w in shown] == ["AttentionExplorer", "StreamExplorer"] * 2
    assert shown[0].model is namespace["yours"] and shown[2].model is namespace["course"]


def _setup_namespace() -> dict:
    """What a learner's code in 09 can use: the names the notebook's first code cell defines."""
    setup = next(c for c in cells(notebook("09")) if c.cell_type == "code")
    namespace = {}
    exec(compile(setup.source, "09 set-up cell", "exec"), namespace)
    return namespace


def _printed(function, *args) -> str:
    with contextlib.redirect_stdout(io.StringIO()) as out:
        function(*args)
    return out.getvalue()


def _hint_pieces(step: str) -> dict[str, list[str]]:
    """Every piece of code a step's hints print (between backquotes), by the method it goes into: the hint's own
    words `__init__` and `forward` say which; `forward` (or init's function body) where a hint names none."""
    methods = {"__init__": [], "forward": []}
    for level in range(1, len(hints.BUILD_HINTS[step]) + 1):
        where = "forward"
        for piece in re.findall(r"`([^`]+)`", _printed(exercises.hint, step, level).split(":\n", 1)[1]):
            if piece in methods:
                where = piece
            else:
                methods[where].append(piece)
    return methods


def _stub_with_hints(step: str, check: str, ns: dict) -> None:
    """Defines in ns the step's stub from notebook 09, each `raise NotImplementedError` replaced by the hint
    pieces for its method, exactly as printed; nothing else is added."""
    stub = next(c.source for c in cells(notebook("09")) if c.cell_type == "code" and check in c.source)
    definition = next(node for node in ast.parse(stub).body if isinstance(node, (ast.ClassDef, ast.FunctionDef)))
    pieces = _hint_pieces(step)
    functions = [definition] if isinstance(definition, ast.FunctionDef) else definition.body
    for function in functions:
        if isinstance(function, ast.FunctionDef):
            mine = pieces["__init__"] if function.name == "__init__" else pieces["forward"]
            body = [node for piece in mine for node in ast.parse(piece).body]
            assert not any(isinstance(node, ast.Return) for node in body[:-1]), f"{step}: code after a return"
            function.body = [node for node in function.body if not isinstance(node, ast.Raise)] + body
    exec(compile(ast.fix_missing_locations(ast.Module([definition], [])), f"09's {step} stub with its hints", "exec"), ns)


def test_every_hint_runs_pasted_into_its_stub_with_nothing_injected():
    """Each build step's stub, as notebook 09 shows it, with every piece of code its hints print pasted in where
    the hint says, in 09's set-up namespace and nothing else: the classes the pieces build pass their checkers,
    step after step (each using the classes the hints built before), and init's pieces run."""
    ns = _setup_namespace()
    for step, check in zip(hints.BUILD_HINTS, CHECKS):
        _stub_with_hints(step, check, ns)
        with contextlib.redirect_stdout(io.StringIO()):
            if step == "init":  # its pieces set no tensor by role in a loop of their own: they must run
                ns["init_weights"](ns["GPT"](13, 8, 16, 2, 2, 64))
            else:
                assert eval(check, ns), check


def test_every_solution_runs_as_printed_in_the_notebook():
    """Each build step's solution, as show_solution prints it, pasted into 09's set-up namespace in order,
    defines what the step's checker then passes."""
    ns = _setup_namespace()
    for step, check in zip(hints.BUILD_HINTS, CHECKS):
        exec(compile(_printed(exercises.show_solution, step), f"show_solution({step!r})", "exec"), ns)
        assert eval(check, ns), check


def test_the_notebook_states_the_build_checkers_tolerance():
    """09's closing and the learner's guide say the same tolerance as the build checkers use."""
    mantissa, exponent = f"{build_track.TOL:.0e}".split("e")  # 2e-05: "2", "-05"
    closing = next(c.source for c in cells(notebook("09")) if c.source.startswith("## What you saw"))
    assert f"{mantissa}\\cdot10^{{{int(exponent)}}}\\,(1 + \\max|\\text{{output}}|)" in closing
    assert "exactly" not in closing
    readme = (Path(__file__).resolve().parents[2] / "docs" / "learner.md").read_text()
    assert f"to within {mantissa}e{int(exponent)} x (1 + max |output|)" in readme


def test_step_7_conventions_are_gpt_2s_as_transformers_initializes_it():
    """N(0, 0.02^2) for every matrix and both embeddings, gains 1, biases 0 are GPT-2's conventions (Hugging
    Face's GPT2 initialization), and its residual projections get 0.02 / sqrt(2L), as Step 7 says."""
    transformers = pytest.importorskip("transformers")
    L = 3
    torch.manual_seed(0)
    gpt2 = transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=65, n_positions=64, n_embd=128, n_layer=L,
                                                                 n_head=4))
    stds = {name: p.std().item() for name, p in gpt2.named_parameters() if p.dim() == 2 and "lm_head" not in name}
    residual = {name for name in stds if name.endswith("c_proj.weight")}  # attention's W_O and the MLP's W_2
    assert len(residual) == 2 * L
    for name, std in stds.items():
        expected = 0.02 / math.sqrt(2 * L) if name in residual else 0.02
        assert abs(std / expected - 1) < 0.1, (name, std, expected)
    for name, p in gpt2.named_parameters():
        if p.dim() == 1:
            assert torch.all(p == (1.0 if ".ln_" in name + "." and name.endswith("weight") else 0.0)), name
    step_7 = next(c.source for c in cells(notebook("09")) if c.source.startswith("## Step 7"))
    assert "GPT-2's conventions" in step_7 and "N(0, 0.02^2)" in step_7 and "0.02/\\sqrt{2L}" in step_7
