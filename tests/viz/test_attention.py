"""The attention explorer and its figure data, driven without a browser."""

import io
import json
import re
import shutil
import subprocess

import numpy
import pytest
import torch

pytest.importorskip("anywidget")
pytest.importorskip("matplotlib")

from PIL import Image  # noqa: E402

from gptlib import COURSE_CONFIG, GPT, GPTConfig, encode, run_with_cache
from gptlib.analysis import attention  # noqa: E402
from gptlib.viz.attention import (  # noqa: E402
    AttentionExplorer,
    AttentionView,
    attention_figure,
    attention_run,
    attention_view,
    describe_view,
    singular_values_figure,
    token_labels,
)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return GPT(COURSE_CONFIG).eval()


def test_labels_make_newline_and_space_visible():
    assert token_labels("a b\nc") == ["a", "␣", "b", "\\n", "c"]


def test_view_holds_the_cached_attention_and_per_head_write_norms(model):
    text = "To be, or not\nto be"
    view = attention_view(model, text, 2, 3)
    _, cache = run_with_cache(model, encode(text))
    torch.testing.assert_close(view.A, cache.A(2)[0, 3])
    # the write norms are per-head terms: their sum (plus b_O) is the cached attention write
    X = cache.ln_1(2)
    terms = attention.head_contributions(model.blocks[2].attn, X)[0]  # (H, T, d)
    torch.testing.assert_close(view.write_norms, terms.norm(dim=-1))
    torch.testing.assert_close(terms.sum(0) + model.blocks[2].attn.b_O, cache.attn_write(2)[0], atol=1e-5, rtol=1e-5)
    assert view.labels[2] == "␣" and view.labels[13] == "\\n"


@pytest.mark.parametrize(
    "text, layer, head, words",
    [
        ("", 0, 0, "at least one character"),
        ("x" * (COURSE_CONFIG.T_max + 1), 0, 0, "T_max = 64"),
        ("naïve ©", 0, 0, "'©', 'ï'"),
        ("ok", COURSE_CONFIG.L, 0, f"layer must be an integer in [0, {COURSE_CONFIG.L - 1}], got {COURSE_CONFIG.L}"),
        ("ok", 0, -1, f"head must be an integer in [0, {COURSE_CONFIG.H - 1}], got -1"),
        ("ok", 0, True, f"head must be an integer in [0, {COURSE_CONFIG.H - 1}], got True"),
    ],
)
def test_view_refuses_bad_input_with_a_reason(model, text, layer, head, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        attention_view(model, text, layer, head)


def test_a_model_with_a_nan_or_inf_weight_is_refused_by_name_in_the_run_and_the_explorer():
    """A diverged training run leaves NaN weights: the explorer says which, instead of drawing a NaN matrix."""
    torch.manual_seed(0)
    broken = GPT(GPTConfig(V=65, T_max=16, d=32, H=2, L=2))
    for bad in (float("nan"), float("inf")):
        with torch.no_grad():
            broken.blocks[1].mlp.W_2[3, 4] = bad
        with pytest.raises(ValueError, match=re.escape("NaN or inf values in blocks.1.mlp.W_2")):
            attention_run(broken, "To be")
        explorer = AttentionExplorer(broken, "To be")
        assert explorer.run is None and "blocks.1.mlp.W_2" in explorer.message


def test_run_holds_every_layer_and_views_index_it(model):
    text = "To be, or not"
    run = attention_run(model, text)
    assert run.A.shape == (COURSE_CONFIG.L, COURSE_CONFIG.H, 13, 13) and run.A.dtype == torch.float32
    for layer in range(COURSE_CONFIG.L):
        view = attention_view(model, text, layer, 1)
        torch.testing.assert_close(run.view(layer, 1).A, view.A)
        torch.testing.assert_close(run.view(layer, 1).write_norms, view.write_norms)


def test_explorer_updates_and_shows_messages(model):
    explorer = AttentionExplorer(model, text="Hello")
    assert explorer.view is not None and explorer.view.A.shape == (5, 5)
    explorer.layer, explorer.head = 3, 1
    assert (explorer.view.layer, explorer.view.head) == (3, 1)
    torch.testing.assert_close(explorer.view.A, attention_view(model, "Hello", 3, 1).A)
    assert explorer.message == "5 characters, layer 3, head 1"
    explorer.text = "a" * COURSE_CONFIG.T_max  # the longest allowed text still draws
    assert explorer.view is not None and explorer.view.A.shape == (64, 64)
    explorer.head = COURSE_CONFIG.H  # set from code: no such head
    assert explorer.view is None and explorer.stale and "head must be an integer in [0, 3], got 4" in explorer.message


def test_the_page_receives_every_layer_and_head_as_binary_buffers(model):
    explorer = AttentionExplorer(model, text="Hello")
    run = attention_run(model, "Hello")
    L, H, T = COURSE_CONFIG.L, COURSE_CONFIG.H, 5
    assert explorer.shape == [L, H, T] and explorer.labels == token_labels("Hello")
    A = torch.from_numpy(numpy.frombuffer(explorer.A, dtype=numpy.float32).copy()).reshape(L, H, T, T)
    norms = torch.from_numpy(numpy.frombuffer(explorer.norms, dtype=numpy.float32).copy()).reshape(L, H, T)
    assert torch.equal(A, run.A) and torch.equal(norms, run.write_norms)
    from ipywidgets.widgets.widget import _remove_buffers

    _, buffer_paths, _ = _remove_buffers(explorer.get_state())
    assert ["A"] in buffer_paths and ["norms"] in buffer_paths  # bytes travel as binary buffers, not JSON lists



def test_each_typed_text_is_answered_with_its_number_so_the_page_can_send_the_next(model):
    """The page sends text and its number in one message (js/common.js's sendTyped) and sends no
    other until `answered` equals that number: every text is answered, the same text sent again
    (a keystroke and its undo) and a refused one too; a text set from code keeps the number."""
    explorer = AttentionExplorer(model, text="Hello")
    runs = []
    explorer.observe(lambda change: runs.append(change["new"]), names="answered")
    explorer.set_state({"text": "Hi", "typed": 1})  # as a message from the page arrives
    assert explorer.answered == 1 and explorer.view.labels == ["H", "i"] and runs == [1]  # one run for both changes
    explorer.set_state({"text": "Hi", "typed": 2})
    assert explorer.answered == 2 and explorer.view.labels == ["H", "i"]
    explorer.set_state({"text": "Hiß", "typed": 3})
    assert explorer.answered == 3 and explorer.stale and "'ß'" in explorer.message
    explorer.text = "Hey"
    assert explorer.answered == 3 and explorer.view.labels == ["H", "e", "y"] and not explorer.stale


@pytest.mark.parametrize("text, words", [("ß", "'ß'"), ("", "at least one character"), ("x" * 65, "T_max = 64")])
def test_bad_text_keeps_the_last_picture_greyed_under_the_reason(model, text, words):
    explorer = AttentionExplorer(model, text="Hello")
    picture, numbers = explorer.static_png(), explorer.A
    explorer.text = text
    assert explorer.view is None and explorer.run is None and explorer.stale
    assert explorer.message.startswith("Cannot draw:") and words in explorer.message
    assert "last valid input" in explorer.message and "Traceback" not in explorer.message
    assert explorer.static_png() == picture and explorer.A == numbers
    explorer.head = 2  # moving a slider while the text is bad keeps the reason on screen
    assert explorer.view is None and words in explorer.message
    explorer.text = "Hello"
    assert explorer.view is not None and not explorer.stale
    assert explorer.static_png() != picture  # head 2 now, not head 0


def test_explorer_leaves_the_callers_mode_and_reads_bfloat16():
    torch.manual_seed(2)
    small = GPT(GPTConfig(T_max=8, d=12, H=3, L=2)).train()
    explorer = AttentionExplorer(small, text="abc")
    assert small.training  # constructing and drawing did not switch the caller's model to eval
    half = GPT(GPTConfig(T_max=8, d=12, H=3, L=2)).to(torch.bfloat16).eval()
    explorer = AttentionExplorer(half, text="abc")
    assert explorer.view is not None and not half.training
    reference = attention_view(half.float(), "abc", 0, 0).A  # the same weights, in float32
    torch.testing.assert_close(explorer.view.A, reference, atol=2e-2, rtol=0)


def test_explorer_works_on_another_gpt():
    torch.manual_seed(1)
    small = GPT(GPTConfig(T_max=8, d=12, H=3, L=2, norm="post"))
    explorer = AttentionExplorer(small, text="abc")
    assert explorer.view.write_norms.shape == (3, 3) and explorer.shape == [2, 3, 3]
    explorer.text = "abcdefghi"
    assert "T_max = 8" in explorer.message


def test_explorer_names_a_model_that_is_not_a_gpt():
    with pytest.raises(ValueError, match="model must be a gptlib GPT, got GPTConfig"):
        AttentionExplorer(COURSE_CONFIG)


def test_repr_says_what_it_is_and_to_run_the_cell(model):
    explorer = AttentionExplorer(model, text="Hi")
    assert repr(explorer).startswith("AttentionExplorer") and "run this cell" in repr(explorer)
    assert len(repr(explorer)) <= 110  # ipywidgets cuts a longer text/plain repr


def test_figures_draw_what_they_are_given(model):
    view = attention_view(model, "ab c", 0, 1)
    fig = attention_figure(view)
    heat, norms = fig.axes[0], fig.axes[1]  # axes[2:] are the colour bars
    torch.testing.assert_close(torch.tensor(heat.images[0].get_array().data), view.A)
    torch.testing.assert_close(torch.tensor(norms.images[0].get_array().data), view.write_norms.T)
    texts = [text.get_text() for text in fig.texts]
    assert texts.count("␣") == 2 and texts.count("a") == 2  # each character labels a row and a column
    assert norms.patches[0].get_x() == 1 - 0.5  # the shown head is outlined
    assert fig.get_label().startswith("Attention pattern A^h of layer 0, head 1 over 4 characters")
    assert fig.get_label().split(": ")[-1].startswith("a→a b→")  # the first query sees only itself
    spectrum = torch.tensor([3.0, 1.0, 1e-9])
    fig = singular_values_figure({"M": spectrum}, 1e-6, "test")
    torch.testing.assert_close(torch.tensor(fig.axes[0].lines[0].get_ydata()), spectrum.double(), check_dtype=False)
    assert fig.get_label().endswith("the rank tolerance 1e-06 (dashed); M: 3 values, largest 3.0e+00.")


def test_the_text_alternative_names_each_querys_strongest_key_unless_two_nearly_tie():
    A = torch.tensor([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.2, 0.3, 0.5]])  # row 1: a tie; row 2: c by 0.2
    view = AttentionView(list("abc"), 1, 2, A, torch.zeros(4, 3))
    assert describe_view(view) == ("Attention pattern A^h of layer 1, head 2 over 3 characters, beside every head's "
                                   "write norm; each query's strongest key (? where the top two weights are within "
                                   "0.001): a→a b→? c→c")


def test_the_kept_figure_draws_each_text_as_a_fresh_one(model):
    """The explorer's figure is reused from text to text: labels of a longer text must vanish for a shorter one."""
    from gptlib.viz.display import render_png

    explorer = AttentionExplorer(model, text="Hi")
    explorer.static_png()
    explorer.text = "To be, or not to be, that is"  # more labels than the first text drew
    explorer.static_png()
    explorer.text = "To be, or not"  # fewer characters: the extra labels must vanish
    explorer.layer, explorer.head = 2, 3
    decode = lambda png: torch.from_numpy(numpy.array(Image.open(io.BytesIO(png))))  # noqa: E731
    assert torch.equal(decode(explorer.static_png()), decode(render_png(attention_figure(explorer.view))))


NODE = shutil.which("node")


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_the_page_describes_a_head_in_the_kernels_words(model, tmp_path):
    """js/attention.js labels its A^h with describeView: the same text as describe_view, ties included,
    and its sliders read "layer 3 (of 0 to 3)" for four layers."""
    generator = torch.Generator().manual_seed(0)
    views = [attention_view(model, "ROMEO:\nBut soft", 1, 2), attention_view(model, "a", 0, 0)]
    for T in (2, 5, 9):  # rows with exact ties, near ties (within and beyond CLEAR_WIN) and clear winners
        A = torch.rand(T, T, generator=generator).tril()
        A[1, :2] = torch.tensor([0.4, 0.4])
        A = A / A.sum(-1, keepdim=True)
        A[-1] = 0.0
        A[-1, :2] = torch.tensor([0.5 - 2**-11, 0.5 + 2**-11])  # a margin of 2^-10 < 1e-3, exact in float32
        views.append(AttentionView([chr(97 + t) for t in range(T)], 3, 1, A.float(), torch.zeros(4, T)))
    cases = [{"labels": v.labels, "layer": v.layer, "head": v.head, "A": v.A.tolist()} for v in views]
    source = tmp_path / "attention.mjs"
    source.write_text(AttentionExplorer._esm)
    runner = tmp_path / "run.mjs"
    runner.write_text(
        f"import {{describeView, positionText}} from {json.dumps(source.as_uri())};\n"
        f"const cases = {json.dumps(cases)};\n"  # float32 weights, printed exactly as float64 JSON
        "console.log(JSON.stringify({texts: cases.map((c) => describeView(c.labels, c.layer, c.head, (t, s) => c.A[t][s])),"
        " positions: [positionText('layer', 0, 4), positionText('head', 3, 4)]}));\n")
    done = json.loads(subprocess.run([NODE, str(runner)], capture_output=True, text=True, timeout=60, check=True).stdout)
    assert done["texts"] == [describe_view(view) for view in views]
    assert " b→? " in done["texts"][3] and done["texts"][3].endswith("e→?") and done["texts"][1].endswith("a→a")
    assert done["positions"] == [f"layer 0 (of 0 to {COURSE_CONFIG.L - 1})", f"head 3 (of 0 to {COURSE_CONFIG.H - 1})"]
