"""The model in the page for the explorers that run it (attention, stream, next character): typed text is run
by js/gpt.js in the page, with no kernel round trip, in the book as in a live front end.

    ModelExplorer                 base of those explorers: sends its model's weights to the page once
    PageWeights.of(model)         the widget holding one model's weights (page_weights' bytes), shared
    shipped_weights()             {key: bytes} of the checkpoints gptlib ships (gptlib.pretrained)
    write_shipped_weights(folder) the files the book ships beside its pages (tools/build_book.py)
    saved_weights_keys(html)      the shipped weights a page's static copies name (the book's preload, page_export)

Where the weights reach the page:
  - a live explorer (JupyterLab, Notebook 7, Voila): its trait page_weights names a PageWeights widget, one
    per set of weights in the kernel, whose bytes go to the page once as a binary buffer, however many
    explorers show that model; they are never saved into the notebook (its static copy holds none);
  - a static copy (the book, a saved page): the copy names its weights by key (the first 16 hex digits of
    their SHA-256) when they are a shipped checkpoint's; the book ships WEIGHTS_DIR/KEY.gptw (fetched
    relative to the page) and WEIGHTS_DIR/KEY.js (the same bytes in base64 for a classic script, which a
    page opened from the file system may load where fetch cannot read a file). A copy of any other model
    keeps its text as saved.
Any GPT that page_weights writes runs in the page, a learner's adopted model too (gptlib.adopt gives a GPT
whose logits were proven equal to the learner's); one it refuses stays with the kernel.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import re
from pathlib import Path

import ipywidgets
import traitlets

from ..checkpoint import config_to_dict
from ..data import VOCABULARY
from ..model import GPT
from .explorer import JS, Explorer, script_json
from .page_weights import page_weights

WEIGHTS_DIR = "gptlib-weights"  # beside the book's pages
GPT_SCRIPT = "gpt-source.js"  # in WEIGHTS_DIR: gpt.js's text for a classic script, globalThis.gptlibGptSource
GPT_SOURCE = (JS / "gpt.js").read_text()


def model_module(name: str, gpt_source: bool = True) -> str:
    """The ES module of an explorer that runs the model in the page: common.js, gpt.js's text (or null, for
    a static copy: the page reads WEIGHTS_DIR/GPT_SCRIPT, shipped beside the weights), inpage.js, then
    js/<name>.js."""
    source = json.dumps(GPT_SOURCE) if gpt_source else "null"
    return ((JS / "common.js").read_text() + f"\nconst GPT_SOURCE = {source};\n"
            f"const WEIGHTS_DIR = {json.dumps(WEIGHTS_DIR)};\nconst GPT_SCRIPT = {json.dumps(GPT_SCRIPT)};\n"
            + (JS / "inpage.js").read_text() + "\n" + (JS / f"{name}.js").read_text())


def weights_key(data: bytes) -> str:
    """The name of a weights file: the first 16 hex digits of its SHA-256."""
    return hashlib.sha256(data).hexdigest()[:16]


class PageWeights(ipywidgets.Widget):
    """One model's weights for the page, sent once as a binary buffer: `data` (page_weights' bytes) and `key`.
    Every explorer of the same weights in a kernel shares one (PageWeights.of)."""

    data = traitlets.Bytes().tag(sync=True)
    key = traitlets.Unicode().tag(sync=True)
    _shared: dict[str, PageWeights] = {}

    @classmethod
    def of(cls, model: GPT) -> PageWeights | None:
        """The widget holding `model`'s weights as they are now, or None where page_weights refuses the model."""
        try:
            data = page_weights(model)
        except ValueError:
            return None  # a model gpt.js does not run: its explorers ask the kernel
        key = weights_key(data)
        if key not in cls._shared:
            cls._shared[key] = cls(data=data, key=key)
        return cls._shared[key]


@functools.cache
def shipped_weights() -> dict[str, bytes]:
    """{key: page_weights' bytes} of every checkpoint gptlib ships."""
    from .. import pretrained

    weights = [page_weights(pretrained.load_pretrained(name)) for name in pretrained.available()]
    return {weights_key(data): data for data in weights}


# A static copy's saved state names shipped weights as "weights":{"key":KEY,...} (ModelExplorer.state, script_json).
SAVED_KEY = re.compile(r'"weights":\{"key":"([0-9a-f]{16})"')


def saved_weights_keys(html: str) -> list[str]:
    """The keys of the shipped weights that the static copies in a page's `html` name, sorted, each once."""
    return sorted(set(SAVED_KEY.findall(html)))


def gpt_source_script() -> str:
    """A classic script setting globalThis.gptlibGptSource to gpt.js's text (inpage.js reads it)."""
    return f"globalThis.gptlibGptSource = {script_json(GPT_SOURCE)};\n"


def weights_script(key: str, data: bytes) -> str:
    """A classic script setting globalThis.gptlibWeights[key] to the weights file `data` in base64."""
    encoded = base64.b64encode(data).decode("ascii")
    return f"(globalThis.gptlibWeights ??= {{}})[{json.dumps(key)}] = \"{encoded}\";\n"


def write_shipped_weights(folder: Path) -> dict[str, int]:
    """Write KEY.gptw and KEY.js of every shipped checkpoint, and GPT_SCRIPT, into `folder`; {file name: bytes written}."""
    folder.mkdir(parents=True, exist_ok=True)
    source = gpt_source_script().encode()
    (folder / GPT_SCRIPT).write_bytes(source)
    written = {GPT_SCRIPT: len(source)}
    for key, data in shipped_weights().items():
        for name, content in ((f"{key}.gptw", data), (f"{key}.js", weights_script(key, data).encode("ascii"))):
            (folder / name).write_bytes(content)
            written[name] = len(content)
    return written


class ModelExplorer(Explorer):
    """An explorer whose typed text the page runs (inpage.js). Subclasses set `module_name`, `_esm =
    model_module(module_name)`, and call send_weights(model) in __init__."""

    page_weights = traitlets.Instance(PageWeights, allow_none=True).tag(sync=True, **ipywidgets.widget_serialization)
    weights_key: str | None = None
    weights_config: dict | None = None
    module_name: str  # js/<module_name>.js

    def saved_module(self) -> str:
        """The static copy's module, without gpt.js's text (the book ships it beside the weights)."""
        return model_module(self.module_name, gpt_source=False)

    @staticmethod
    def course_model(model) -> GPT:
        """`model`, a gptlib GPT predicting the course's characters (V <= 65), or a ValueError saying which rule it breaks."""
        if not isinstance(model, GPT):
            raise ValueError(f"model must be a gptlib GPT, got {type(model).__name__}")
        if model.config.V > len(VOCABULARY):
            raise ValueError(f"model must predict the course's characters: V <= {len(VOCABULARY)}, got V = {model.config.V}")
        return model

    def send_weights(self, model: GPT) -> None:
        """Share `model`'s weights with the page (nothing where gpt.js does not run the model)."""
        self.page_weights = PageWeights.of(model)
        self.weights_key = self.page_weights.key if self.page_weights else None
        self.weights_config = config_to_dict(model.config)

    def synced(self) -> dict:
        values = super().synced()
        values.pop("page_weights", None)  # a widget: the static copy names shipped weights by key instead
        return values

    def state(self) -> dict:
        """Explorer.state, with the key and configuration of the weights the book ships where they are a shipped
        checkpoint's (the page refuses a file of another configuration under that name)."""
        shipped = self.weights_key is not None and self.weights_key in shipped_weights()
        return super().state() | {"weights": {"key": self.weights_key, "config": self.weights_config} if shipped else None}
