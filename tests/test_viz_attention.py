"""The attention explorer and its figure data, driven without a browser."""

import pytest
import torch

pytest.importorskip("ipywidgets")
pytest.importorskip("matplotlib")

from gptlib import COURSE_CONFIG, GPT, GPTConfig, circuits, encode, run_with_cache  # noqa: E402
from gptlib.viz.attention import (  # noqa: E402
    AttentionExplorer,
    attention_figure,
    attention_view,
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
    terms = circuits.head_contributions(model.blocks[2].attn, X)[0]  # (H, T, d)
    torch.testing.assert_close(view.write_norms, terms.norm(dim=-1))
    torch.testing.assert_close(terms.sum(0) + model.blocks[2].attn.b_O, cache.attn_write(2)[0], atol=1e-5, rtol=1e-5)
    assert view.labels[2] == "␣" and view.labels[13] == "\\n"


@pytest.mark.parametrize(
    "text, layer, head, words",
    [
        ("", 0, 0, "at least one character"),
        ("x" * (COURSE_CONFIG.T_max + 1), 0, 0, "T_max = 64"),
        ("naïve ©", 0, 0, "'©', 'ï'"),
        ("ok", COURSE_CONFIG.L, 0, "layer"),
        ("ok", 0, -1, "head"),
    ],
)
def test_view_refuses_bad_input_with_a_reason(model, text, layer, head, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(")):
        attention_view(model, text, layer, head)


def test_explorer_updates_and_shows_messages(model):
    explorer = AttentionExplorer(model, text="Hello")
    assert explorer.view is not None and explorer.view.A.shape == (5, 5)
    explorer.layer.value, explorer.head.value = 3, 1
    assert (explorer.view.layer, explorer.view.head) == (3, 1)
    torch.testing.assert_close(explorer.view.A, attention_view(model, "Hello", 3, 1).A)
    explorer.text.value = "ß"
    assert explorer.view is None and "'ß'" in explorer.message.value and "vocabulary" in explorer.message.value
    explorer.text.value = ""
    assert "at least one character" in explorer.message.value
    explorer.text.value = "a" * COURSE_CONFIG.T_max  # the longest allowed text still draws
    assert explorer.view is not None and explorer.view.A.shape == (64, 64)
    for name in ("text", "layer", "head", "message", "output"):
        assert f"gptlib-attn-{name}" in getattr(explorer, name)._dom_classes


def test_explorer_works_on_another_gpt():
    torch.manual_seed(1)
    small = GPT(GPTConfig(T_max=8, d=12, H=3, L=2, norm="post"))
    explorer = AttentionExplorer(small, text="abc")
    assert explorer.view.write_norms.shape == (3, 3)
    assert list(explorer.head.options) == [0, 1, 2]
    explorer.text.value = "abcdefghi"
    assert "T_max = 8" in explorer.message.value


def test_figures_draw_what_they_are_given(model):
    view = attention_view(model, "ab c", 0, 1)
    fig = attention_figure(view)
    heat, bars = fig.axes[0], fig.axes[1]  # axes[2] is the colorbar
    torch.testing.assert_close(torch.tensor(heat.images[0].get_array().data), view.A)
    assert [label.get_text() for label in heat.get_xticklabels()] == ["a", "b", "␣", "c"]
    heights = torch.tensor([patch.get_height() for patch in bars.patches]).reshape(COURSE_CONFIG.H, 4)
    torch.testing.assert_close(heights, view.write_norms.double(), check_dtype=False)
    spectrum = torch.tensor([3.0, 1.0, 1e-9])
    fig = singular_values_figure({"M": spectrum}, 1e-6, "test")
    torch.testing.assert_close(torch.tensor(fig.axes[0].lines[0].get_ydata()), spectrum.double(), check_dtype=False)
