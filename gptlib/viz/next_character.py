"""The next-character explorer: a prompt, the model's distribution over the character that follows it, and a
sample drawn from it character by character (Section 5: x_{t+1} ~ softmax(z_t / temperature)).

    next_character_distribution(model, text, temperature, top_k)  the probabilities the bars show (V,)
    NextCharacterExplorer(model, text)                             the widget, run in the page (js/next_character.js)

The page runs the model itself (gptlib.viz.page_model, js/gpt.js): typing, the temperature, top-k and the
sample never ask the kernel. The sample is drawn in the page from a seeded generator of its own (mulberry32,
js/next_character.js): the same seed gives the same sample in any page, not the sample torch would draw.
The kernel checks every value where it is set (a temperature that is not a finite number in (0, 10], a top-k
outside [1, V], a seed that is not an integer in [0, 2^32 - 1]: ValueError naming the rule), runs the model for
its own .probabilities and the static copy's picture, and refuses text the model cannot read in .message.
"""

from __future__ import annotations

import torch
import traitlets
from matplotlib.figure import Figure

from .. import validation
from ..data import VOCABULARY, encode
from ..model import GPT, eval_mode
from .attention import token_labels
from .display import render_png
from .explorer import Checked, Whole
from .page_model import ModelExplorer, model_module

TEMPERATURE_MAX = 10.0
SEED_MAX = 2**32 - 1  # mulberry32's seeds


def next_character_distribution(model: GPT, text: str, temperature: float = 1.0, top_k: int | None = None) -> torch.Tensor:
    """softmax(z_T / temperature) (V,) over the character after `text`, float64, with every character outside the
    top_k largest logits (ties: the earlier character first) at 0 and the rest renormalised. ValueError for
    empty text, text longer than T_max, characters outside the vocabulary, a temperature that is not a finite
    number > 0 or a top_k outside [1, V]."""
    config = model.config
    temperature = validation.real("temperature", temperature, above=0)
    top_k = config.V if top_k is None else validation.integer("top_k", top_k, at_least=1, at_most=config.V)
    if not text:
        raise ValueError("type at least one character")
    if len(text) > config.T_max:
        raise ValueError(f"the text has {len(text)} characters; this model reads at most T_max = {config.T_max}")
    idx = encode(text)  # (T,)
    validation.finite_weights(model)
    with eval_mode(model), torch.no_grad():
        z = model(idx)[-1].double()  # (V,)
    kept = z.sort(descending=True, stable=True).indices[:top_k]  # (top_k,)
    scaled = torch.full_like(z, -torch.inf)
    scaled[kept] = (z[kept] - z.max()) / temperature
    return torch.softmax(scaled, dim=-1)


class Temperature(Checked, traitlets.Float):
    """The temperature: a finite number in (0, TEMPERATURE_MAX]."""

    def check(self, obj, value) -> float:
        return validation.real(self.label, value, above=0, at_most=TEMPERATURE_MAX)


class NextCharacterExplorer(ModelExplorer):
    """Type a prompt; see the model's distribution over the next character as a bar per character; move the
    temperature and top-k; sample characters one after another from a seed.

    Traits: text (the prompt), temperature (0 < temperature <= 10), top_k (1..V), seed (0..2^32 - 1);
    .probabilities (V,) float64 of the last prompt drawn; .message and .stale as in gptlib.viz.explorer.
    CSS classes in the page: gptlib-next-explorer (the whole), gptlib-next-text, gptlib-next-temperature,
    gptlib-next-top-k, gptlib-next-seed, gptlib-next-sample-button, gptlib-next-message, gptlib-next-bars,
    gptlib-next-sample (the sampled text).
    """

    module_name = "next_character"
    _esm = model_module(module_name)
    what = "the distribution over the next character, and samples from it"
    text = traitlets.Unicode().tag(sync=True)
    temperature = Temperature(1.0, "temperature")
    top_k = Whole("top_k", lambda self: self.model.config.V, at_least=1)
    seed = Whole("seed", lambda self: SEED_MAX)
    # the kernel's run, drawn until the page runs the model: uint8 (V,) round(255 p), for drawing only (the same
    # bytes on any CPU, where float32 probabilities would differ in their last bits), and the characters they name
    probs = traitlets.Bytes().tag(sync=True)
    vocabulary = traitlets.Unicode().tag(sync=True)

    def __init__(self, model: GPT, text: str = "ROMEO:\n", temperature: float = 1.0, top_k: int | None = None,
                 seed: int = 0):
        self.model = self.course_model(model)
        self.probabilities: torch.Tensor | None = None
        self.shown: tuple[str, torch.Tensor] | None = None  # (prompt, probabilities) last drawn: the static copy's
        super().__init__(vocabulary=VOCABULARY[: model.config.V])
        with self.hold_trait_notifications():
            self.text, self.temperature, self.seed = text, temperature, seed
            self.top_k = model.config.V if top_k is None else top_k
        if model.config.V == len(VOCABULARY):
            self.send_weights(model)
        self.answer_typing(self.rerun)
        self.observe(self.rerun, names=["temperature", "top_k"])
        self.rerun()

    def rerun(self, _change=None) -> None:
        """The distribution after the prompt; text the model cannot read keeps the last one under the reason."""
        try:
            self.probabilities = next_character_distribution(self.model, self.text, self.temperature, self.top_k)
        except ValueError as error:
            self.refuse(str(error))
            return
        self.probs = (self.probabilities * 255).round().to(torch.uint8).numpy().tobytes()
        self.shown = self.text, self.probabilities
        self.show(f"{len(self.text)} characters, temperature {self.temperature:g}, top-k {self.top_k}")

    def static_png(self) -> bytes:
        return render_png(next_character_figure(*self.shown, self.vocabulary))

    def alt_text(self) -> str:
        return describe_distribution(*self.shown, self.vocabulary)


def describe_distribution(text: str, probabilities: torch.Tensor, vocabulary: str) -> str:
    """The bars' text alternative: the prompt's end and the five likeliest next characters."""
    labels = token_labels(vocabulary)
    top = probabilities.topk(min(5, len(vocabulary)))
    likeliest = ", ".join(f"'{labels[int(k)]}' {p:.2f}" for p, k in zip(top.values.tolist(), top.indices))
    return (f"The next character after the {len(text)}-character prompt ending "
            f"'{''.join(token_labels(text[-12:]))}': a bar per character; the likeliest {likeliest}.")


def next_character_figure(text: str, probabilities: torch.Tensor, vocabulary: str) -> Figure:
    """A bar per character of the vocabulary at its probability of coming next."""
    fig = Figure(figsize=(8, 2.6), dpi=80, layout="constrained")  # small: a notebook saves it in the static copy
    ax = fig.subplots()
    ax.bar(range(len(vocabulary)), probabilities.numpy(), color="#1565c0")
    ax.set_xticks(range(len(vocabulary)), token_labels(vocabulary), fontsize=7)
    ax.set_ylim(0, 1)
    ax.set_ylabel("probability")
    ax.set_xlabel("next character")
    fig.set_label(describe_distribution(text, probabilities, vocabulary))
    return fig
