"""A blank page in headless Chromium that holds gptlib/viz/js/gpt.js and weights files, and nothing else.

    with model_page(browser) as page:
        page.serve("/w/course.gptw", page_weights(model))
        result = page.run("/w/course.gptw", "To be")        # every number gpt.js computes, as numpy arrays

Every request of the page is answered from the files served here (Playwright's page.route, at an address
no server listens on): nothing is fetched from anywhere, and `page.requests` lists what the page asked
for. A module can be served under another name with its source changed (planted mistakes). Used by
tests/browser/test_page_model.py and benchmarks/page_model.py.
"""

from __future__ import annotations

import base64
import contextlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .servers import offline_context

ORIGIN = "http://127.0.0.1:9"  # the discard port: page.route answers every request before it could leave
GPT_JS = Path(__file__).resolve().parents[3] / "gptlib" / "viz" / "js" / "gpt.js"
MODULE = "/gpt.js"
TYPES = {".js": "text/javascript", ".html": "text/html", ".gptw": "application/octet-stream"}

# In the page: run `text` on the weights at weightsUrl with the module at moduleUrl (each read once per
# page), and return every result packed as base64 float32 (a page hands back JSON, and this is exact).
RUN = """async ([moduleUrl, weightsUrl, text, probes]) => {
  const gpt = await import(moduleUrl);
  window.__models ??= new Map();
  const key = `${moduleUrl} ${weightsUrl}`;
  if (!window.__models.has(key)) {
    window.__models.set(key, gpt.readWeights(await (await fetch(weightsUrl)).arrayBuffer()));
  }
  const model = window.__models.get(key), { d } = model.config;
  const run = new gpt.Session(model).run(gpt.encode(model, text)), T = run.T;
  const pack = (arrays) => {
    const all = new Float32Array(arrays.reduce((n, x) => n + x.length, 0));
    arrays.reduce((offset, x) => (all.set(x, offset), offset + x.length), 0);
    const bytes = new Uint8Array(all.buffer);
    let binary = "";
    for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
    return btoa(binary);
  };
  const labels = gpt.writeLabels(model.config);
  const stack = new Float32Array(labels.length * T * d); // (n, T, d) in writeLabels order
  for (let t = 0; t < T; t++) gpt.writeRows(run, t, model.config).forEach((row, i) => stack.set(row, (i * T + t) * d));
  const contributions = model.config.norm !== "pre" ? [] : probes.map(([t, token, against]) => {
    const c = gpt.directContributions(model, run, t, token, against);
    return [...c.values, c.rest, c.logit];
  });
  return {
    T, labels, contributions, logits: pack([run.logits]), attention: pack(run.attention.flat()),
    heads: pack(run.writes.heads.flat()), mlp: pack(run.writes.mlp), stack: pack([stack]), lnfScale: pack([run.lnfScale]),
  };
}"""


def unpacked(text: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), dtype="<f4")


@dataclass
class ModelPage:
    """A Playwright page holding gpt.js, with the files it may fetch."""

    page: object
    files: dict[str, bytes] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def serve(self, path: str, body: bytes) -> str:
        self.files[path] = body
        return path

    def module(self, path: str, replacements: tuple[tuple[str, str], ...] = ()) -> str:
        """gpt.js served at `path`, each (old, new) of replacements substituted (ValueError if old is not in it)."""
        source = GPT_JS.read_text(encoding="utf-8")
        for old, new in replacements:
            if old not in source:
                raise ValueError(f"gpt.js holds no {old!r} to replace")
            source = source.replace(old, new)
        return self.serve(path, source.encode("utf-8"))

    def evaluate(self, script: str, argument=None):
        return self.page.evaluate(script, argument)

    def run(self, weights: str, text: str, probes=(), module: str = MODULE) -> dict:
        """Everything gpt.js computes for `text`: T, labels, logits (T, V), attention (L, H, T, T), heads
        (L, H, T, d), mlp (L, T, d), stack (n, T, d), lnfScale (T,), contributions (per probe: values, rest, logit)."""
        result = self.evaluate(RUN, [module, weights, text, [list(p) for p in probes]])
        for name in ("logits", "attention", "heads", "mlp", "stack", "lnfScale"):
            result[name] = unpacked(result[name]).astype(np.float64)
        return result

    def _answer(self, route) -> None:
        path = route.request.url[len(ORIGIN):].split("?")[0]
        if path not in self.files:
            route.fulfill(status=404, body="not served")
            return
        route.fulfill(status=200, body=self.files[path], content_type=TYPES.get(Path(path).suffix, "text/plain"),
                      headers={"Access-Control-Allow-Origin": "*"})


@contextlib.contextmanager
def model_page(browser):
    """A ModelPage on a blank page of an offline context (every request outside 127.0.0.1 refused), gpt.js
    served at MODULE; uncaught page errors are collected in .errors."""
    context = offline_context(browser)
    try:
        page = context.new_page()
        holder = ModelPage(page)
        page.on("pageerror", lambda error: holder.errors.append(str(error)))
        page.on("request", lambda request: holder.requests.append(request.url))
        page.route(f"{ORIGIN}/**", holder._answer)
        holder.serve("/index.html", b"<!doctype html><title>gpt.js</title>")
        holder.module(MODULE)
        page.goto(f"{ORIGIN}/index.html")
        yield holder
    finally:
        context.close()
