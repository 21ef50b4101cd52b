"""gptlib.viz.next_character and gptlib.viz.page_model, driven without a browser: the distribution the bars show
against torch's softmax, what the explorer refuses, and the weights it shares with the page."""

import math
import re

import pytest
import torch

pytest.importorskip("anywidget")

from gptlib import COURSE_CONFIG, GPT, GPTConfig, encode, pretrained  # noqa: E402
from gptlib.viz.attention import AttentionExplorer  # noqa: E402
from gptlib.viz.next_character import NextCharacterExplorer, next_character_distribution  # noqa: E402
from gptlib.viz.page_model import PageWeights, shipped_weights, write_shipped_weights  # noqa: E402
from gptlib.viz.page_weights import page_weights  # noqa: E402
from gptlib.viz.stream import StreamExplorer  # noqa: E402


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return GPT(COURSE_CONFIG).eval()


@pytest.mark.parametrize("temperature, top_k", [(1.0, None), (0.3, None), (2.5, 5), (1.0, 1)])
def test_the_distribution_is_softmax_of_the_logits_over_temperature_on_the_top_k(model, temperature, top_k):
    text = "ROMEO:\nBut soft"
    with torch.no_grad():
        z = model(encode(text))[-1].double()  # (V,)
    k = top_k or model.config.V
    kept = z.argsort(descending=True)[:k]
    expected = torch.zeros_like(z)
    expected[kept] = torch.softmax(z[kept] / temperature, dim=-1)  # independent of the shift by max(z)
    p = next_character_distribution(model, text, temperature, top_k)
    assert torch.allclose(p, expected, atol=1e-12, rtol=0) and math.isclose(p.sum().item(), 1.0, abs_tol=1e-12)
    assert (p > 0).sum().item() == k


@pytest.mark.parametrize("name, value, words", [
    ("temperature", 0, "temperature must be a finite number > 0 and <= 10.0, got 0.0"),
    ("temperature", -1.5, "temperature must be a finite number > 0 and <= 10.0, got -1.5"),
    ("temperature", math.nan, "temperature must be a finite number > 0 and <= 10.0, got nan"),
    ("temperature", True, "temperature must be a finite number > 0 and <= 10.0, got True"),
    ("top_k", 0, "top_k must be an integer in [1, 65], got 0"),
    ("top_k", 66, "top_k must be an integer in [1, 65], got 66"),
    ("seed", 1.5, "seed must be an integer in [0, 4294967295], got 1.5"),
    ("seed", "3", "seed must be an integer in [0, 4294967295], got '3'"),
    ("seed", 2**32, "seed must be an integer in [0, 4294967295], got 4294967296"),
])
def test_a_setting_that_breaks_its_rule_is_refused_where_it_is_set_and_nothing_changes(model, name, value, words):
    explorer = NextCharacterExplorer(model)
    before = (explorer.temperature, explorer.top_k, explorer.seed, explorer.probabilities.clone())
    with pytest.raises(ValueError, match=f"^{re.escape(words)}$"):
        setattr(explorer, name, value)
    assert (explorer.temperature, explorer.top_k, explorer.seed) == before[:3]
    assert torch.equal(explorer.probabilities, before[3])


@pytest.mark.parametrize("text, words", [
    ("", "type at least one character"),
    ("x" * 65, "the text has 65 characters; this model reads at most T_max = 64"),
    ("ROMEO~", "'~'"),
])
def test_text_the_model_cannot_read_keeps_the_last_distribution_under_the_reason(model, text, words):
    explorer = NextCharacterExplorer(model, text="ROMEO:\n")
    drawn = explorer.probabilities
    explorer.text = text
    assert explorer.message.startswith("Cannot draw: ") and words in explorer.message and explorer.stale
    assert explorer.probabilities is drawn and explorer.alt_text().startswith("The next character after the 7-character")


def test_constructor_arguments_are_checked(model):
    with pytest.raises(ValueError, match="^model must be a gptlib GPT, got str$"):
        NextCharacterExplorer("shakespeare")
    with pytest.raises(ValueError, match=re.escape("temperature must be a finite number > 0 and <= 10.0, got 0.0")):
        NextCharacterExplorer(model, temperature=0)


def test_explorers_of_one_model_share_one_weights_widget_that_holds_page_weights_bytes(model):
    explorers = [AttentionExplorer(model, text="To be"), StreamExplorer(model, "To be"), NextCharacterExplorer(model)]
    shared = {id(explorer.page_weights) for explorer in explorers}
    assert len(shared) == 1 and explorers[0].page_weights.data == page_weights(model)
    assert all("page_weights" not in explorer.state() for explorer in explorers)  # never saved into a copy
    assert all(explorer.state()["weights"] is None for explorer in explorers)  # a random model: no file shipped


def test_a_model_page_weights_refuses_stays_with_the_kernel():
    torch.manual_seed(0)
    half = GPT(COURSE_CONFIG).eval().to(torch.bfloat16)
    assert PageWeights.of(half) is None and AttentionExplorer(half, text="To be").page_weights is None
    small = GPT(GPTConfig(V=20, T_max=8, d=8, H=2, L=1)).eval()
    assert StreamExplorer(small, "abc").page_weights is None  # its refusals are the kernel's own words


def test_a_shipped_checkpoints_copy_names_its_weights_file_and_the_files_hold_them(tmp_path):
    course = pretrained.load_pretrained("shakespeare")
    explorer = AttentionExplorer(course, text="To be")
    saved = explorer.state()["weights"]
    assert saved["key"] in shipped_weights() and saved["config"]["d"] == course.config.d
    written = write_shipped_weights(tmp_path)
    data = (tmp_path / f"{saved['key']}.gptw").read_bytes()
    assert data == page_weights(course) and written[f"{saved['key']}.gptw"] == len(data)
    assert (tmp_path / "gpt-source.js").exists() and (tmp_path / f"{saved['key']}.js").stat().st_size > len(data)
