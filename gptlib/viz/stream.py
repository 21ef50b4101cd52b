"""The stream explorer: who wrote one prediction (Remark 3.4; gptlib.analysis.decomposition), drawn in the page.

    stream_run(model, text)       every write's direct contribution at every position, to the
                                  predicted, the true next and one chosen character, and every A^h
    describe_row(run, l, h, t)    the text alternative of one attention row
    describe_rows(run)            describe_row of every layer, head and query, at once
    stream_figure(a, title, quantity, run, layer, head, t)  the bars above one head's attention row
    StreamExplorer(model, text)   the widget: text, position, token; a bar per write; a head's attention row

The numbers are gptlib.analysis.decomposition's (logit_pieces, attribution_from); the page draws them, and
computes them itself for a text typed there (js/stream.js, with the model in the page, js/gpt.js). Every text
the page shows as a picture's alternative is written here (describe_attribution for the bars, describe_row
for an attention row) and by js/stream.js in the same words for a text the page ran.

What it refuses: a model that is not a gptlib GPT, or whose V exceeds the course's 65 characters
(its predictions could not be named), raises ValueError at construction. A model with fewer tokens
reads the course's first V characters: its default character is 'e' where it has one, else its last
character. Text or a character it cannot read (outside the vocabulary or the model's part of it,
named), and a model the readers refuse (post-norm, NaN or inf weights: decomposition.check_model),
are refused in .message, the last picture kept. A position, layer, head or mode that breaks its rule,
set from code or sent by the page, raises ValueError where it is set; a message from the page holding
one is rolled back whole (explorer.Refused), so nothing of it is kept or drawn.
The static copy shows the last input drawn, with the run and character it was drawn with, however
many refusals followed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import traitlets
from matplotlib.figure import Figure

from .. import validation
from ..analysis.cache import run_with_cache
from ..analysis.decomposition import Attribution, LogitPieces, attribution_from, check_model, logit_pieces, stream_writes
from ..data import UNKNOWN_SHOWN, VOCABULARY, encode
from ..model import GPT, eval_mode
from .attention import token_labels
from .decomposition import attribution_bars, bars_width, describe_attribution, wrapped
from .display import render_png
from .explorer import OneOf, Whole
from .page_model import ModelExplorer, model_module

# The token whose logit the bars split: the model's top prediction at the position, the
# difference predicted - true next character, or a character the learner picks.
MODES = ("predicted", "difference", "character")


def quantity(mode: str) -> str:
    """What the bars of a mode add up to: the logit of one character, or in "difference" mode a logit difference."""
    return "logit difference" if mode == "difference" else "logit"


def quoted(label: str) -> str:
    """A character label (token_labels: '\\n' and '␣' already visible) in plain single quotes, never
    escaped again as repr would ('\\\\n')."""
    return f"'{label}'"


@dataclass(frozen=True)
class StreamRun:
    """One forward pass on a text, with every write's direct contribution to every logit kept."""

    labels: list[str]  # T characters, made visible
    writes: tuple[str, ...]  # n write labels, decomposition.write_labels
    predicted: list[int]  # (T,) the model's top prediction at each position
    true_next: list[int]  # (T - 1,) the character that follows each position in the text
    pieces: LogitPieces  # of the run: direct (n, 1, T, V)
    Z: torch.Tensor  # (1, T, V) the model's own logits
    A: torch.Tensor  # (L, H, T, T) float32, every head's attention pattern

    def attribution(self, mode: str, position: int, character: int) -> Attribution:
        """The direct contributions at `position` for `mode`; ValueError where the mode has no token."""
        if mode == "difference" and position == len(self.labels) - 1:
            raise ValueError(f"position {position} is the text's last: no true next character to subtract")
        token = character if mode == "character" else self.predicted[position]
        against = self.true_next[position] if mode == "difference" else None
        return attribution_from(self.pieces, self.Z, position, token, against)

    def title(self, mode: str, position: int, character: int) -> str:
        """What the bars at `position` split, in words ('... to z('e') - z('o') at position 39 after 'h'')."""
        def z(token: int) -> str:
            return f"z({quoted(token_labels(VOCABULARY[token])[0])})"
        if mode == "character":
            target = z(character)
        elif mode == "predicted":
            target = f"{z(self.predicted[position])} (the prediction)"
        else:
            target = f"{z(self.predicted[position])} - {z(self.true_next[position])} (prediction minus true next)"
        return f"Direct contributions to {target} at position {position} after {quoted(self.labels[position])}"


def stream_run(model: GPT, text: str) -> StreamRun:
    """Run `model` on `text` once, keeping every write apart (decomposition.stream_writes) and every A^h.

    Raises ValueError for empty text, text longer than T_max, characters outside the vocabulary or
    outside the model's part of it, the first V characters (naming them), or a model the readers
    refuse (decomposition.check_model). The model's train/eval mode is left as it came.
    """
    model = check_model(model)
    if not text:
        raise ValueError("type at least one character")
    if len(text) > model.config.T_max:
        raise ValueError(f"the text has {len(text)} characters; this model reads at most T_max = {model.config.T_max}")
    idx = encode(text)  # (T,)
    V = model.config.V
    unread = sorted(set(text) - set(VOCABULARY[:V]))
    if unread:
        shown = ", ".join(repr(ch) for ch in unread[:UNKNOWN_SHOWN])
        more = f" and {len(unread) - UNKNOWN_SHOWN} more" if len(unread) > UNKNOWN_SHOWN else ""
        raise ValueError(f"the text holds characters this model does not read (V = {V}): {shown}{more}")
    writes = stream_writes(model, idx)
    with eval_mode(model), torch.no_grad():
        Z, cache = run_with_cache(model, idx)
        A = torch.stack([cache.A(l)[0] for l in range(model.config.L)])  # (L, H, T, T)
    Z = Z.float().reshape(1, len(text), -1)  # (1, T, V)
    return StreamRun(token_labels(text), writes.labels, Z[0].argmax(dim=-1).tolist(), idx[1:].tolist(),
                     logit_pieces(model, writes), Z, A.float())


def describe_row(run: StreamRun, layer: int, head: int, t: int) -> str:
    """The text alternative of head `head` of layer `layer`'s attention row at query t: its three strongest
    keys, the earlier key first where two weigh the same. layer, head and t must name a row of run.A (L, H, T, T)."""
    L, H, T = run.A.shape[:3]
    layer = validation.integer("layer", layer, at_least=0, at_most=L - 1)
    head = validation.integer("head", head, at_least=0, at_most=H - 1)
    t = validation.integer("t", t, at_least=0, at_most=T - 1)
    row = run.A[layer, head, t, : t + 1].double()  # (t + 1,): causal, keys 0..t
    weights, keys = row.sort(descending=True, stable=True)
    return row_words(run.labels, layer, head, t, weights[:3].tolist(), keys[:3].tolist())


def describe_rows(run: StreamRun) -> list[str]:
    """describe_row of every layer, head and query, in the order [(l * H + h) * T + t], from one sort
    of every row (the explorer sends all of them with each text: one call per row took ~100 ms)."""
    L, H, T = run.A.shape[:3]
    future = torch.ones(T, T, dtype=torch.bool).triu(1)  # keys after the query: last in every sorted row
    weights, keys = run.A.double().masked_fill(future, -math.inf).sort(dim=-1, descending=True, stable=True)
    weights, keys = weights[..., :3].tolist(), keys[..., :3].tolist()  # (L, H, T, 3)
    return [row_words(run.labels, l, h, t, weights[l][h][t][: t + 1], keys[l][h][t][: t + 1])
            for l in range(L) for h in range(H) for t in range(T)]


def row_words(labels: list[str], layer: int, head: int, t: int, weights: list[float], keys: list[int]) -> str:
    """describe_row's words for the given strongest keys and their weights, strongest first."""
    strongest = ", ".join(f"{s} {quoted(labels[s])} {w:.2f}" for w, s in zip(weights, keys))
    return f"L{layer}H{head} at query {t} {quoted(labels[t])}, strongest keys: {strongest}."


class StreamExplorer(ModelExplorer):
    """Pick a text, a position and a token; see each write's direct contribution to its logit.

    One bar per write into the stream (E[x], P, every head, every attention bias b_O, every MLP),
    at its direct contribution through LN_f with the run's scale frozen
    (gptlib.analysis.decomposition.direct_logit_attribution's numbers); hover a bar for its value, click a
    head (or its button) for its attention row A^h[t, :] (sent as bytes round(255 A^h) to draw; its
    caption, describe_row, gives the strongest weights from the float32 run). The kernel runs the model once per text
    and sends, for every position, the contributions to the predicted, the true next and the chosen
    character's logits with every A^h; moving the position, the mode or the head is answered in
    the page, and so are a typed text and character where the page runs the model (gptlib.viz.page_model;
    the kernel runs them too, for its own values).
    Traits: text (refused in .message when unreadable, as the attention explorer does), position
    (0..T-1), mode (one of MODES), character (one character of the vocabulary), layer and head
    (the head whose attention row is shown). A number or mode that breaks its rule raises
    ValueError where it is set; .message and .stale as in gptlib.viz.explorer.
    CSS classes: gptlib-stream-explorer, gptlib-stream-text, gptlib-stream-position,
    gptlib-stream-mode, gptlib-stream-character, gptlib-stream-message, gptlib-stream-bars,
    gptlib-stream-caption, gptlib-stream-heads (the head buttons), gptlib-stream-row (the attention row).
    """

    module_name = "stream"
    _esm = model_module(module_name)
    what = "each write's direct contribution to one prediction"
    text = traitlets.Unicode().tag(sync=True)
    position = Whole("position", lambda self: len(self.run.labels) - 1 if self.run else None)
    mode = OneOf("mode", MODES)
    character = traitlets.Unicode("e").tag(sync=True)
    layer = Whole("layer", lambda self: self.model.config.L - 1)
    head = Whole("head", lambda self: self.model.config.H - 1)
    # sent per text: values float32 (3, T, n + 2), for each mode and position the n writes' direct
    # contributions, then LN_f's part beta W_U, then the model's logit (NaN where the mode has no token)
    values = traitlets.Bytes().tag(sync=True)
    A = traitlets.Bytes().tag(sync=True)  # uint8 (L, H, T, T), C order: round(255 A^h), for drawing only
    shape = traitlets.List(traitlets.Int(), [0, 0, 0, 0]).tag(sync=True)  # [n, T, L, H]
    labels = traitlets.List(traitlets.Unicode()).tag(sync=True)  # T characters
    writes = traitlets.List(traitlets.Unicode()).tag(sync=True)  # n write labels
    descriptions = traitlets.List(traitlets.List(traitlets.Unicode())).tag(sync=True)  # [mode][t]
    rows = traitlets.List(traitlets.Unicode()).tag(sync=True)  # [(l * H + h) * T + t]: describe_row

    def __init__(self, model: GPT, text: str = "PETRUCHIO:\nWhy, how now, Kate! I hope thou art not mad:",
                 position: int = 0, mode: str = "predicted", character: str | None = None, layer: int = 0,
                 head: int = 0):
        self.model = self.course_model(model)
        self.vocabulary = VOCABULARY[: model.config.V]  # the characters the model reads: the course's first V
        if character is None:  # 'e', or the model's last character where its vocabulary stops before 'e'
            character = "e" if "e" in self.vocabulary else self.vocabulary[-1]
        self.run: StreamRun | None = None  # the last readable text's run
        self.readable = False  # whether the text and character now set could be read
        self.token = 0  # the id of the last character that could be read (set with each run)
        self.drawn_with: tuple[StreamRun, int] | None = None  # (run, token) of the last input drawn: the static copy's
        super().__init__(text=text, character=character)
        if model.config.V == len(VOCABULARY):  # a smaller vocabulary's refusals are the kernel's own words
            self.send_weights(model)
        self.answer_typing(self.rerun)
        self.observe(self.rerun, names="character")
        self.observe(self.redraw, names=["position", "mode", "layer", "head"])
        self.rerun()
        with self.hold_trait_notifications():
            self.position, self.mode, self.layer, self.head = position, mode, layer, head

    def rerun(self, _change=None) -> None:
        """Run the model on the text, and send every position's numbers; what cannot be read keeps the last ones."""
        try:
            if len(self.character) != 1 or self.character not in self.vocabulary:
                V = len(self.vocabulary)
                part = f" this model reads (the course's first {V})" if V < len(VOCABULARY) else ""
                raise ValueError(f"the character must be one character of the {V}-character vocabulary{part}, "
                                 f"got {self.character[:12]!r}")
            run = stream_run(self.model, self.text)
        except ValueError as error:
            self.readable = False
            self.refuse(str(error))
            return
        self.run, self.token, self.readable = run, encode(self.character).item(), True
        n, T = len(run.writes), len(run.labels)
        L, H = run.A.shape[:2]
        values = torch.full((len(MODES), T, n + 2), math.nan)
        descriptions = []
        for m, mode in enumerate(MODES):
            said = []
            for t in range(T):
                try:
                    attribution = run.attribution(mode, t, self.token)
                except ValueError as error:
                    said.append(str(error))
                    continue
                values[m, t] = torch.cat([attribution.values, torch.tensor([attribution.rest, attribution.logit])])
                said.append(describe_attribution(attribution, run.title(mode, t, self.token), quantity(mode)))
            descriptions.append(said)
        with self.hold_sync():  # one message to the page
            self.position = min(self.position, T - 1)  # a shorter text: its last position
            self.values = values.numpy().tobytes()
            self.A = (run.A * 255).round().to(torch.uint8).contiguous().numpy().tobytes()
            self.labels, self.writes, self.descriptions = run.labels, list(run.writes), descriptions
            self.rows = describe_rows(run)
            self.shape = [n, T, L, H]
        self.redraw()

    def attribution(self) -> Attribution:
        """The direct contributions the bars show now (ValueError where the mode has no token there)."""
        return self.run.attribution(self.mode, self.position, self.token)

    def redraw(self, _change=None) -> None:
        if not self.readable:
            return  # the text's or the character's message stays
        try:
            attribution = self.attribution()
        except ValueError as error:
            self.refuse(str(error))
            return
        self.show(f"{len(self.run.labels)} characters, position {self.position}, {self.mode}: "
                  f"logit {attribution.logit:+.2f}; attention row of L{self.layer}H{self.head}")

    def show(self, message: str) -> None:
        super().show(message)
        self.drawn_with = self.run, self.token

    def shown(self) -> tuple[Attribution, str]:
        """The attribution and title of the last input drawn (what the static copy shows): its run and
        character's id too, which a readable text or character refused at its position has replaced since."""
        (run, token), mode, t = self.drawn_with, self.last_drawn["mode"], self.last_drawn["position"]
        return run.attribution(mode, t, token), run.title(mode, t, token)

    def static_png(self) -> bytes:
        return render_png(stream_figure(*self.shown(), quantity(self.last_drawn["mode"]), self.drawn_with[0],
                                        *self.drawn_row()))

    def alt_text(self) -> str:
        """What the page says of the bars, then of the attention row drawn below them."""
        return (describe_attribution(*self.shown(), quantity(self.last_drawn["mode"])) + " Below, "
                + describe_row(self.drawn_with[0], *self.drawn_row()))

    def drawn_row(self) -> tuple[int, int, int]:
        """(layer, head, position) of the attention row last drawn."""
        return self.last_drawn["layer"], self.last_drawn["head"], self.last_drawn["position"]


def stream_figure(attribution: Attribution, title: str, quantity: str, run: StreamRun, layer: int, head: int,
                  t: int) -> Figure:
    """The stream explorer's static picture, as its page draws it: attribution_figure's bars above, and below
    head `head` of layer `layer`'s attention row from query t, a bar per key s <= t."""
    fig = Figure(figsize=(bars_width(attribution), 6.4), layout="constrained")
    bars, row = fig.subplots(2, 1, height_ratios=(3, 2))
    attribution_bars(bars, attribution, title, quantity)
    weights = run.A[layer, head, t, : t + 1].numpy()  # (t + 1,): causal, keys 0..t
    row.bar(range(t + 1), weights, color="#546e7a")
    row.set_xticks(range(t + 1), run.labels[: t + 1], fontsize=8)
    row.set_xlabel("key position s (its character)")
    row.set_ylabel(f"A^h weight from query {t}")
    row.set_ylim(0, 1)
    row.set_title(wrapped(f"L{layer}H{head}: attention row at position {t}, {quoted(run.labels[t])}",
                          bars_width(attribution)), fontsize=10)
    fig.set_label(describe_attribution(attribution, title, quantity) + " Below, " + describe_row(run, layer, head, t))
    return fig
