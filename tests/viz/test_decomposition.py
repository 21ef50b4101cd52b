"""gptlib.viz.decomposition's figures (a bar per write at its contribution, a lens line per reading at its
losses) and gptlib.viz.stream's stream explorer, driven without a browser: its numbers are decomposition's, and what
it refuses."""

import math

import numpy
import pytest
import torch

pytest.importorskip("anywidget")
pytest.importorskip("matplotlib")

from gptlib import COURSE_CONFIG, GPT, VOCABULARY, GPTConfig, encode, run_with_cache  # noqa: E402
from gptlib.analysis.decomposition import Attribution, LensReading, direct_logit_attribution, write_labels  # noqa: E402
from gptlib.viz.decomposition import attribution_figure, describe_attribution, logit_lens_figure  # noqa: E402
from gptlib.viz.stream import MODES, StreamExplorer, StreamRun, describe_row, describe_rows, stream_run  # noqa: E402
from tests.viz.test_explorer import outline, saved_call  # noqa: E402

TEXT = "To be, or not\nto be"


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return GPT(COURSE_CONFIG).eval()


def sent_values(explorer) -> torch.Tensor:  # (3, T, n + 2), as the page reads the bytes
    n, T = explorer.shape[:2]
    return torch.from_numpy(numpy.frombuffer(explorer.values, dtype=numpy.float32).copy()).reshape(len(MODES), T, n + 2)


def test_every_rows_words_come_from_one_sort_as_from_one_row_each(model):
    """describe_rows (what the explorer sends) says what describe_row says of every row, ties too:
    the earlier of two keys of equal weight first."""
    run = stream_run(model, "To be, or not to be")
    L, H, T = run.A.shape[:3]
    assert describe_rows(run) == [describe_row(run, l, h, t) for l in range(L) for h in range(H) for t in range(T)]
    even = StreamRun(run.labels, run.writes, run.predicted, run.true_next, run.pieces, run.Z,
                     torch.ones(L, H, T, T).tril() / torch.arange(1, T + 1).reshape(T, 1))  # every key alike
    assert describe_rows(even)[T - 1] == describe_row(even, 0, 0, T - 1)
    assert describe_row(even, 0, 0, T - 1).endswith("strongest keys: 0 'T' 0.05, 1 'o' 0.05, 2 '␣' 0.05.")


@pytest.mark.parametrize("where, rule", [
    (dict(layer=-1), "layer must be an integer in [0, 3], got -1"), (dict(layer=4), "layer must be an integer in [0, 3], got 4"),
    (dict(head=-1), "head must be an integer in [0, 3], got -1"), (dict(head=1.0), "head must be an integer in [0, 3], got 1.0"),
    (dict(t=-1), "t must be an integer in [0, 18], got -1"), (dict(t=19), "t must be an integer in [0, 18], got 19")])
def test_a_row_outside_the_run_is_refused_with_its_bound(model, where, rule):
    """Before: a negative t or layer read a row from the end (Python indexing) and described it as row -1."""
    run = stream_run(model, "To be, or not to be")  # T = 19, L = H = 4
    with pytest.raises(ValueError) as refused:
        describe_row(run, **{"layer": 0, "head": 0, "t": 0} | where)
    assert rule in str(refused.value)


def test_the_numbers_sent_are_direct_logit_attributions_for_every_position_and_mode(model):
    explorer = StreamExplorer(model, TEXT, character="t")
    idx = encode(TEXT)
    T, n = len(TEXT), len(write_labels(model))
    assert explorer.shape == [n, T, COURSE_CONFIG.L, COURSE_CONFIG.H] and explorer.writes == list(write_labels(model))
    values = sent_values(explorer)
    with torch.no_grad():
        Z = model(idx.unsqueeze(0))[0]  # (T, V)
    for t in range(T):
        predicted = int(Z[t].argmax())
        cases = {"predicted": (predicted, None), "character": (encode("t").item(), None)}
        if t < T - 1:
            cases["difference"] = (predicted, int(idx[t + 1]))
        else:  # the last position has no true next character: nothing to draw there
            assert values[MODES.index("difference"), t].isnan().all()
        for mode, (token, against) in cases.items():
            reference = direct_logit_attribution(model, idx, t, token, against=against)
            sent = values[MODES.index(mode), t]
            torch.testing.assert_close(sent[:n], reference.values, atol=1e-5, rtol=1e-5)
            assert sent[n].item() == pytest.approx(reference.rest, abs=1e-5)
            assert sent[n + 1].item() == pytest.approx(reference.logit, abs=1e-4)
            # the bars and LN_f's part add up to the model's logit: the decomposition is exact
            assert (sent[:n].sum() + sent[n]).item() == pytest.approx(reference.logit, abs=1e-4)


def test_the_attention_rows_sent_are_the_cached_patterns_to_a_255th(model):
    explorer = StreamExplorer(model, TEXT)
    _, cache = run_with_cache(model, encode(TEXT))
    L, H, T = COURSE_CONFIG.L, COURSE_CONFIG.H, len(TEXT)
    A = torch.from_numpy(numpy.frombuffer(explorer.A, dtype=numpy.uint8).copy()).reshape(L, H, T, T).float() / 255
    expected = torch.stack([cache.A(l)[0] for l in range(L)])
    assert (A - expected).abs().max() <= 0.5 / 255 + 1e-6
    from ipywidgets.widgets.widget import _remove_buffers

    _, buffer_paths, _ = _remove_buffers(explorer.get_state())
    assert ["A"] in buffer_paths and ["values"] in buffer_paths  # binary buffers, not JSON lists


def test_every_text_alternative_is_written_once_by_the_kernel(model):
    explorer = StreamExplorer(model, TEXT, position=4, mode="difference")
    run = stream_run(model, TEXT)
    T = len(TEXT)
    assert [len(said) for said in explorer.descriptions] == [T, T, T]
    assert len(explorer.rows) == COURSE_CONFIG.L * COURSE_CONFIG.H * T
    attribution = run.attribution("difference", 4, encode("e").item())
    assert explorer.descriptions[1][4] == describe_attribution(attribution, run.title("difference", 4, encode("e").item()),
                                                               "logit difference")
    # a difference's bars add up to a logit difference, one character's to a logit (Figure 10.1's text alternative)
    assert "add up to the logit difference " in explorer.descriptions[1][4]
    assert "add up to the logit " in explorer.descriptions[0][4] and "difference" not in explorer.descriptions[0][4]
    figure = attribution_figure(attribution, "title", quantity="logit difference")
    assert "add up to the logit difference " in figure.get_label()
    assert explorer.alt_text().startswith(explorer.descriptions[1][4] + " Below, ")  # the static copy says what the page says
    assert "no true next character" in explorer.descriptions[1][T - 1]
    # row (l, h, t) names query t's three strongest keys, from the float32 pattern
    l, h, t = 2, 3, 9
    row = run.A[l, h, t, : t + 1]
    best = int(row.argmax())
    said = explorer.rows[(l * COURSE_CONFIG.H + h) * T + t]
    assert said.startswith(f"L2H3 at query 9 '{run.labels[9]}', strongest keys: {best} '{run.labels[best]}' {row.max():.2f}")


def test_moves_show_their_numbers_and_the_last_position_has_no_difference(model):
    explorer = StreamExplorer(model, TEXT)
    explorer.position, explorer.mode = 5, "difference"
    assert not explorer.stale and explorer.message.startswith(f"{len(TEXT)} characters, position 5, difference")
    explorer.position = len(TEXT) - 1
    assert explorer.stale and "no true next character" in explorer.message
    explorer.mode = "predicted"
    assert not explorer.stale and explorer.last_drawn["position"] == len(TEXT) - 1
    explorer.layer, explorer.head = 3, 2
    assert explorer.message.endswith("attention row of L3H2")


@pytest.mark.parametrize("name, value, words", [
    ("position", len(TEXT), f"position must be an integer in [0, {len(TEXT) - 1}], got {len(TEXT)}"),
    ("position", -1, "got -1"),
    ("position", True, "position must be an integer in [0, 18], got True"),
    ("position", math.nan, "got nan"),
    ("position", 2.0, "got 2.0"),
    ("layer", COURSE_CONFIG.L, f"layer must be an integer in [0, {COURSE_CONFIG.L - 1}]"),
    ("head", False, "head must be an integer"),
    ("mode", "logit", "mode must be one of predicted, difference, character, got 'logit'"),
])
def test_a_number_or_mode_that_breaks_its_rule_is_refused_where_it_is_set(model, name, value, words):
    explorer = StreamExplorer(model, TEXT)
    before = explorer.synced()
    with pytest.raises(ValueError, match=words.replace("[", r"\[").replace("]", r"\]")):
        setattr(explorer, name, value)
    assert explorer.synced() == before  # nothing changed, nothing reached the page


@pytest.mark.parametrize("name, value, words", [
    ("text", "naïve", "'ï'"),
    ("text", "<!--<script>", "'<', '>'"),
    ("text", "", "at least one character"),
    ("text", "x" * (COURSE_CONFIG.T_max + 1), "T_max = 64"),
    ("character", "é", "one character of the 65-character vocabulary, got 'é'"),
    ("character", "ab", "got 'ab'"),
    ("character", "", "got ''"),
])
def test_unreadable_text_or_character_keeps_the_last_picture_under_the_reason(model, name, value, words):
    explorer = StreamExplorer(model, TEXT, position=3)
    picture, numbers = explorer.static_png(), explorer.values
    setattr(explorer, name, value)
    assert explorer.stale and explorer.message.startswith("Cannot draw:") and words in explorer.message
    assert explorer.values == numbers and explorer.static_png() == picture
    explorer.position = 4  # a move while the input is unreadable keeps the reason on screen
    assert explorer.stale and words in explorer.message
    assert explorer.last_drawn["position"] == 3 and explorer.last_drawn[name] != value


def test_a_shorter_text_moves_the_position_to_its_last_character(model):
    explorer = StreamExplorer(model, TEXT, position=len(TEXT) - 1)
    explorer.text = "To be"
    assert explorer.position == 4 and not explorer.stale and explorer.shape[1] == 5


def test_the_static_copy_survives_hostile_text_and_shows_the_last_drawn_values(model):
    explorer = StreamExplorer(model, TEXT, position=6)
    explorer.text = "<!--<script>"  # refused: the copy keeps the last readable text
    bundle, _ = explorer._repr_mimebundle_()
    page = bundle["text/html"]
    parsed = outline(page)
    assert parsed.tags == ["div", "style", "/style", "img", "script", "/script", "/div"]
    (script,) = parsed.scripts
    assert "<" not in script
    _, state = saved_call(script)
    assert state["text"] == TEXT and state["position"] == 6 and state["live"] is False
    assert state["descriptions"][0][6] in page.replace("&#x27;", "'")  # the PNG's alt text is the page's caption


def test_repr_and_a_model_that_is_not_a_gpt(model):
    assert repr(StreamExplorer(model, "ab")) == ("StreamExplorer, each write's direct contribution to one prediction: "
                                                 "run this cell in Jupyter to use it")
    with pytest.raises(ValueError, match="model must be a gptlib GPT, got str"):
        StreamExplorer("gpt")
    with pytest.raises(ValueError, match="^model must be a gptlib GPT, got str$"):
        stream_run("gpt", "ab")


def test_the_explorer_leaves_the_callers_mode_and_refuses_a_post_norm_model():
    torch.manual_seed(2)
    small = GPT(GPTConfig(T_max=8, d=12, H=3, L=2)).train()
    explorer = StreamExplorer(small, "abc")
    assert small.training and explorer.shape == [len(write_labels(small)), 3, 2, 3]
    post = GPT(GPTConfig(T_max=8, d=12, H=3, L=2, norm="post"))
    assert "pre-norm" in StreamExplorer(post, "abc").message


def test_every_character_of_the_vocabulary_can_be_chosen_and_is_named_legibly(model):
    explorer = StreamExplorer(model, "ab", mode="character")
    for character, shown in ((VOCABULARY[0], "z('\\n')"), (VOCABULARY[-1], "z('z')"), (" ", "z('␣')")):
        explorer.character = character
        assert not explorer.stale and explorer.descriptions[2][0].startswith(f"Direct contributions to {shown} at")


@pytest.mark.parametrize("sent", [{"mode": "logit"}, {"mode": ""}, {"position": 5, "mode": "logit"},
                                  {"mode": "difference", "position": 99}, {"layer": 1, "head": 7}])
def test_values_sent_by_the_page_that_break_a_rule_are_refused_and_rolled_back_together(model, sent):
    """As ipywidgets applies a message from the page (set_state): nothing of a message with a bad value stays."""
    explorer = StreamExplorer(model, TEXT, position=3)
    before, drawn, message, picture = explorer.synced(), explorer.last_drawn, explorer.message, explorer.static_png()
    with pytest.raises(ValueError, match="must be"):
        explorer.set_state(sent)
    assert explorer.synced() == before and explorer.last_drawn == drawn and explorer.message == message
    assert explorer.static_png() == picture
    explorer.set_state({"position": 5, "mode": "difference"})  # a good message is still taken whole
    assert explorer.last_drawn["position"] == 5 and explorer.last_drawn["mode"] == "difference"


def small_vocabulary_model(V: int) -> GPT:
    torch.manual_seed(3)
    return GPT(GPTConfig(V=V, T_max=16, d=12, H=3, L=2)).eval()


def test_a_model_with_a_smaller_vocabulary_draws_with_a_default_character_of_its_own():
    small = small_vocabulary_model(10)  # reads VOCABULARY[:10]: no letters at all
    text = VOCABULARY[:10]
    explorer = StreamExplorer(small, text, mode="character")
    assert explorer.character == VOCABULARY[9] and not explorer.stale
    assert explorer.descriptions[2][0].startswith(f"Direct contributions to z('{VOCABULARY[9]}') at position 0")
    assert StreamExplorer(small_vocabulary_model(50), "ab").character == "e"  # 'e' where the model has it


def test_a_smaller_vocabulary_refuses_characters_it_does_not_read_by_name():
    small = small_vocabulary_model(10)
    explorer = StreamExplorer(small, "$3'")
    explorer.character = "e"
    assert explorer.stale and ("the character must be one character of the 10-character vocabulary this model "
                               "reads (the course's first 10), got 'e'") in explorer.message
    explorer.character = "3"
    assert not explorer.stale
    explorer.text = "Kate!"
    assert explorer.stale and "the text holds characters this model does not read (V = 10): 'K', 'a', 'e', 't'" \
        in explorer.message
    explorer = StreamExplorer(small, "$3'", character="e")  # refused in the message, as an unknown one is
    assert explorer.stale and "got 'e'" in explorer.message and not explorer.drawn


def test_a_model_with_more_tokens_than_characters_is_refused():
    with pytest.raises(ValueError, match=r"^model must predict the course's characters: V <= 65, got V = 66$"):
        StreamExplorer(small_vocabulary_model(66), "ab")


def test_after_two_refusals_in_a_row_the_static_copy_shows_the_last_input_drawn(model):
    explorer = StreamExplorer(model, TEXT, position=15, mode="difference")
    drawn = explorer.descriptions[MODES.index("difference")][15] + " Below, " + describe_row(explorer.run, 0, 0, 15)
    assert explorer.alt_text() == drawn
    explorer.text = "To be"  # readable, but its position 4 is its last: no true next character, refused twice
    assert explorer.stale and "no true next character" in explorer.message and explorer.position == 4
    assert explorer.last_drawn["text"] == TEXT and explorer.last_drawn["position"] == 15
    assert explorer.alt_text() == drawn  # the input drawn, not the new text's run at the old position
    bundle, _ = explorer._repr_mimebundle_()
    assert drawn in bundle["text/html"].replace("&#x27;", "'")


def test_a_character_chosen_while_the_position_is_refused_never_reaches_the_static_copy(model):
    explorer = StreamExplorer(model, TEXT, position=len(TEXT) - 1, mode="character", character="e")
    drawn = explorer.alt_text()
    assert drawn.startswith("Direct contributions to z('e') at position 18")
    explorer.mode = "difference"  # refused: the last position has no true next character
    explorer.character = "q"  # read and sent, but the bars still cannot be drawn: a second refusal
    assert explorer.stale and explorer.last_drawn["character"] == "e"
    assert explorer.alt_text() == drawn  # not z('q'), an input never drawn


def test_a_model_with_non_finite_weights_is_refused_in_the_message(model):
    broken = GPT(GPTConfig(T_max=16, d=12, H=3, L=2)).eval()
    with torch.no_grad():
        broken.blocks[0].attn.W_K[1, 2, 0] = math.inf
    explorer = StreamExplorer(broken, "abc")
    assert explorer.stale and "model's weights must be finite, got 1 NaN or inf values in blocks.0.attn.W_K" in explorer.message
    assert not explorer.drawn and "text/html" not in explorer._repr_mimebundle_()[0]


def test_each_write_is_a_bar_at_its_contribution_and_the_label_names_the_largest():
    attribution = Attribution(("E[x]", "P", "L0H0", "L0 MLP"), torch.tensor([0.5, -0.25, 2.0, -1.0]), rest=0.125,
                              logit=1.375)
    fig = attribution_figure(attribution, "demo")
    ax = fig.axes[0]
    numpy.testing.assert_array_equal([bar.get_height() for bar in ax.patches], [0.5, -0.25, 2.0, -1.0])
    assert [tick.get_text() for tick in ax.get_xticklabels()] == ["E[x]", "P", "L0H0", "L0 MLP"]
    assert "L0H0 (+2.00), L0 MLP (-1.00), E[x] (+0.50)" in fig.get_label()
    assert "the logit +1.38" in fig.get_label()
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("write into the stream", "direct contribution to the logit")


def test_the_y_axis_names_a_logit_difference_when_told():
    attribution = Attribution(("E[x]", "P"), torch.tensor([0.5, -0.25]), rest=0.0, logit=0.25)
    ax = attribution_figure(attribution, "demo", quantity="logit difference z_e - z_o").axes[0]
    assert ax.get_ylabel() == "direct contribution to the logit difference z_e - z_o"


def test_each_reading_is_a_line_through_its_losses():
    reading = LensReading(torch.tensor([4.0, 2.0, 1.5]), torch.tensor([3.0, 2.0, 1.0]), torch.tensor([0.1, 0.4, 0.6]))
    fig = logit_lens_figure({"trained": reading}, uniform=4.17)
    line = fig.axes[0].lines[0]
    numpy.testing.assert_array_equal(line.get_xdata(), [0, 1, 2])
    numpy.testing.assert_array_equal(line.get_ydata(), [4.0, 2.0, 1.5])
    assert "trained from 4.00 at depth 0 to 1.50 at depth 2" in fig.get_label()
