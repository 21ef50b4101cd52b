"""gptlib/viz/js/gpt.js in headless Chromium equals gptlib's GPT: the shipped models and small random ones,
at several texts, number for number; planted mistakes in the module make that comparison fail; its
incremental session equals a fresh run; bad weights files and bad text are refused in one sentence,
the text in the kernel's own words.

The reference is gptlib's forward pass on the same weights in float64 (model.double()): gpt.js computes
in float64 from the file's float32 weights, so it can be held to the issue's tolerances, attention within
1e-6 and every logit, write and contribution within 1e-5 (1 + max |logit|). Against the float32 model the
kernel runs, logits meet the same bound, and attention entries that bound plus torch's own float32
rounding (measured in the same test, float32 against float64: up to ~1.2e-6 on the course model).
"""

import copy
import math

import numpy as np
import pytest
import torch

from gptlib import GPT, GPTConfig
from gptlib.analysis.attention import attention_input, head_contributions
from gptlib.analysis.cache import run_with_cache
from gptlib.analysis.decomposition import attribution_from, ln_f_scale, logit_pieces, stream_writes
from gptlib.data import VOCABULARY, encode
from gptlib.pretrained import load_pretrained
from gptlib.viz.attention import attention_run
from gptlib.viz.page_weights import page_weights
from gptlib.viz.stream import stream_run
from tests.support.browser.page_model import ORIGIN, model_page

ATTENTION_TOLERANCE = 1e-6  # absolute, on entries of A^h
RELATIVE_TOLERANCE = 1e-5  # times (1 + max |logit|), on logits, writes and direct contributions

SPEECH = "First Citizen:\nBefore we proceed any further, hear me speak.\nAll"  # 64 characters, T_max
RANDOM_CONFIGS = {  # each a switch or size the course models do not exercise
    "one_head_one_layer": GPTConfig(V=7, T_max=9, d=6, H=1, L=1),
    "odd_d_head_tied": GPTConfig(V=11, T_max=12, d=15, H=3, L=2, tie_weights=True),
    "post_norm": GPTConfig(V=13, T_max=10, d=12, H=2, L=2, d_ff=20, norm="post", ln_eps=1e-3),
    "no_mask_attention_only": GPTConfig(V=9, T_max=8, d=8, H=2, L=2, causal=False, attn_only=True),
}


def random_model(config: GPTConfig) -> GPT:
    """Weights of std 0.5 (biases, gamma and beta too): attention far from uniform, every part visible."""
    torch.manual_seed(sum(map(ord, repr(config))))
    model = GPT(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(std=0.5)
    return model


def random_text(config: GPTConfig, T: int) -> str:
    generator = torch.Generator().manual_seed(T)
    return "".join(VOCABULARY[i] for i in torch.randint(config.V, (T,), generator=generator).tolist())


MODELS = {"shakespeare": load_pretrained("shakespeare"), "induction": load_pretrained("induction")}
MODELS.update((name, random_model(config)) for name, config in RANDOM_CONFIGS.items())
TEXTS = {
    "shakespeare": ["e", "To be, or not to be", SPEECH],
    "induction": ["a", "xKq!fzxKq!fz", ("QwErTy uIoP;" * 6)[:64]],
}
TEXTS.update((name, [random_text(c, 1), random_text(c, c.T_max // 2 + 1), random_text(c, c.T_max)])
             for name, c in RANDOM_CONFIGS.items())


@pytest.fixture(scope="module")
def pages(browser):
    """One page for the whole module, every model's weights file served in it."""
    with model_page(browser) as page:
        for name, model in MODELS.items():
            page.serve(f"/w/{name}.gptw", page_weights(model))
        yield page


@pytest.fixture
def page_of_models(pages):
    """The shared page; after each test, no uncaught error and no request beyond the files it was served."""
    yield pages
    assert not pages.errors, f"JavaScript errors in the page: {pages.errors}"
    outside = [url for url in pages.requests if not url.startswith(ORIGIN)]
    assert not outside, f"the page asked for {outside}"


@torch.no_grad()
def reference(model: GPT, text: str) -> dict:
    """gptlib's numbers for `text` in float64: logits, every A^h, every head's write, and for a pre-norm
    model every write (decomposition.stream_writes), LN_f's frozen scale, and the logit pieces."""
    model = copy.deepcopy(model).double()
    idx = encode(text)
    Z, cache = run_with_cache(model, idx)  # (T, V)
    L = model.config.L
    found = {"Z": Z.numpy(), "A": torch.stack([cache.A(l)[0] for l in range(L)]).numpy(),  # (L, H, T, T)
             "heads": torch.stack([head_contributions(model.blocks[l].attn, attention_input(model, cache, l),
                                                      cache.A(l))[0] for l in range(L)]).numpy()}  # (L, H, T, d)
    if model.config.norm == "pre":
        writes = stream_writes(model, idx)
        found.update(labels=list(writes.labels), stack=writes.stack[:, 0].numpy(),  # (n, T, d)
                     scale=ln_f_scale(model, writes.final_stream)[0, :, 0].numpy(), pieces=logit_pieces(model, writes))
    return found


def probes(Z: np.ndarray) -> list[tuple[int, int, int | None]]:
    """(position, token, against) to attribute: the prediction at the first, middle and last positions,
    and at the last one the difference with the next token id."""
    T, V = Z.shape
    chosen = [(t, int(Z[t].argmax()), None) for t in sorted({0, T // 2, T - 1})]
    return chosen + [(T - 1, int(Z[T - 1].argmax()), (int(Z[T - 1].argmax()) + 1) % V)]


def differences(page, model: GPT, name: str, text: str, module: str = "/gpt.js") -> list[str]:
    """Where gpt.js (served at `module`) and gptlib disagree on `text`, one line each; [] when they agree.
    NaN anywhere is a disagreement."""
    ref = reference(model, text)
    c = model.config
    T = len(text)
    got = page.run(f"/w/{name}.gptw", text, probes(ref["Z"]), module=module)
    tolerance = RELATIVE_TOLERANCE * (1 + np.abs(ref["Z"]).max())
    found = []

    def compare(what, mine, theirs, bound):
        gap = np.abs(np.asarray(mine, dtype=np.float64).reshape(np.shape(theirs)) - theirs)
        if not np.all(gap <= bound):  # NaN fails too
            found.append(f"{what}: off by {np.nanmax(gap) if np.isfinite(gap).any() else 'NaN'} > {bound:.2g}")

    compare("logits", got["logits"], ref["Z"], tolerance)
    compare("A^h", got["attention"], ref["A"], ATTENTION_TOLERANCE)
    compare("head writes", got["heads"], ref["heads"], tolerance)
    top = ref["Z"].argmax(axis=1)
    runner_up = np.sort(ref["Z"], axis=1)[:, -2]
    clear = ref["Z"].max(axis=1) - runner_up > 2 * tolerance  # a top two closer than that is rounding's choice
    if np.any(got["logits"].reshape(T, c.V).argmax(axis=1)[clear] != top[clear]):
        found.append("top prediction differs")
    if c.norm == "pre":
        if got["labels"] != ref["labels"]:
            found.append(f"write labels {got['labels']} != {ref['labels']}")
        compare("writes", got["stack"], ref["stack"], tolerance)
        compare("LN_f scale", got["lnfScale"], ref["scale"], RELATIVE_TOLERANCE * (1 + ref["scale"].max()))
        for (t, token, against), row in zip(probes(ref["Z"]), got["contributions"]):
            a = attribution_from(ref["pieces"], torch.from_numpy(ref["Z"])[None], t, token, against)
            compare(f"direct contributions at {t}", row, [*a.values.tolist(), a.rest, a.logit], tolerance)
    return found


@pytest.mark.parametrize("name", list(MODELS))
def test_the_page_computes_what_gptlib_computes(page_of_models, name):
    model = MODELS[name]
    for text in TEXTS[name]:
        assert differences(page_of_models, model, name, text) == [], (name, text)


@torch.no_grad()
def test_against_the_float32_model_the_kernel_runs_the_gap_is_torchs_own_rounding(page_of_models):
    """The explorers' kernel path runs the float32 model: its logits and top predictions agree at the same
    bound, and its A^h within the bound plus how far float32 torch itself is from float64 torch."""
    for name in ("shakespeare", "induction"):
        model, text = MODELS[name], TEXTS[name][-1]
        Z32, cache32 = run_with_cache(model, encode(text))
        Z64, cache64 = run_with_cache(copy.deepcopy(model).double(), encode(text))
        A32 = torch.stack([cache32.A(l)[0] for l in range(model.config.L)]).double()
        A64 = torch.stack([cache64.A(l)[0] for l in range(model.config.L)])
        own_rounding = (A32 - A64).abs().max().item()
        got = page_of_models.run(f"/w/{name}.gptw", text)
        tolerance = RELATIVE_TOLERANCE * (1 + Z32.abs().max().item())
        assert np.abs(got["logits"] - Z32.double().numpy().ravel()).max() <= tolerance
        assert np.abs(got["attention"] - A32.numpy().ravel()).max() <= ATTENTION_TOLERANCE + own_rounding
        top_two = Z32.topk(2, dim=1).values  # (T, 2)
        clear = (top_two[:, 0] - top_two[:, 1] > 2 * tolerance).numpy()  # closer: rounding's choice
        assert (got["logits"].reshape(Z32.shape).argmax(1) == Z32.argmax(1).numpy())[clear].all()


# One mistake each, planted by replacing a line of gpt.js's source: the comparison above must catch it.
PLANTED = {
    "no 1/sqrt(d_head)": ("const scale = 1 / Math.sqrt(d_head);", "const scale = 1;"),
    "mask off by one": ("const last = causal ? t : T - 1;", "const last = causal ? t + 1 : T - 1;"),
    "LayerNorm without epsilon": ("const scale = Math.sqrt(variance + eps);", "const scale = Math.sqrt(variance);"),
    "GELU's tanh form": ("return 0.5 * t * (1 + erf(t / Math.SQRT2));",
                         "return 0.5 * t * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (t + 0.044715 * t ** 3)));"),
}


@pytest.mark.parametrize("mistake", list(PLANTED))
def test_a_planted_mistake_fails_the_comparison(page_of_models, mistake):
    module = page_of_models.module(f"/planted-{len(page_of_models.files)}.js", (PLANTED[mistake],))
    assert differences(page_of_models, MODELS["shakespeare"], "shakespeare", "To be, or not to be") == []
    found = differences(page_of_models, MODELS["shakespeare"], "shakespeare", "To be, or not to be", module=module)
    assert found, f"planting '{mistake}' went unnoticed"


# In the page: a session fed a typing sequence (appends, an edit in the middle, deletions, an edit at the
# start) against a fresh session at each step, every array compared; the largest difference seen.
INCREMENTAL = """async ([weightsUrl, steps]) => {
  const gpt = await import("/gpt.js");
  const model = gpt.readWeights(await (await fetch(weightsUrl)).arrayBuffer());
  const session = new gpt.Session(model);
  const arrays = (run) => [run.logits, run.lnfScale, run.writes.embed, run.writes.position, ...run.attention.flat(),
                           ...run.writes.heads.flat(), ...run.writes.mlp];
  let largest = 0;
  for (const text of steps) {
    const tokens = gpt.encode(model, text);
    const kept = arrays(session.run(tokens)), fresh = arrays(new gpt.Session(model).run(tokens));
    kept.forEach((x, i) => x.forEach((v, j) => { largest = Math.max(largest, Math.abs(v - fresh[i][j])); }));
  }
  return largest;
}"""


def edited(text: str, i: int, V: int) -> str:
    """text with its character i replaced by the next one of the model's vocabulary."""
    return text[:i] + VOCABULARY[(VOCABULARY.index(text[i]) + 1) % V] + text[i + 1 :]


@pytest.mark.parametrize("name", ["shakespeare", "post_norm", "no_mask_attention_only"])
def test_a_session_kept_across_edits_gives_the_fresh_runs_numbers_exactly(page_of_models, name):
    text, V = TEXTS[name][-1], MODELS[name].config.V
    T = len(text)
    steps = [text[:t] for t in range(1, T + 1, 7)] + [text]  # typing at the end
    steps += [edited(text, T // 2, V),  # an edit in the middle
              text[: T - 3], text[: T - 3] + text[:2],  # deleting, then typing again
              edited(text, 0, V)]  # an edit at the start
    assert page_of_models.evaluate(INCREMENTAL, [f"/w/{name}.gptw", steps]) == 0


def test_erf_and_gelu_equal_their_float64_values(page_of_models):
    z = np.concatenate([np.linspace(-7, 7, 14_001), [0.0, 1e-300, 5.999999, 6.0, 3.0, -3.0]])
    erf, gelu = page_of_models.evaluate("""async (zs) => {
        const gpt = await import("/gpt.js");
        return [zs.map(gpt.erf), zs.map(gpt.gelu)];
    }""", z.tolist())
    assert np.abs(np.array(erf) - [math.erf(v) for v in z]).max() < 1e-13
    exact = torch.nn.functional.gelu(torch.from_numpy(z), approximate="none").numpy()  # float64, torch's erf form
    assert np.abs(np.array(gelu) - exact).max() < 1e-12


# Texts each refusal rule sees: empty, too long (in code points: 64 emoji are 128 UTF-16 units), outside
# the vocabulary (quoted as Python's repr quotes them, sorted by code point, five named and the rest counted).
HOSTILE_TEXTS = ["", "a" * 65, "é" * 70, "😀" * 64, "naïve café", "tab\there", "nul\x00", '"quoted"', "back\\slash",
                 "zero\u200bwidth", "line\u2028sep", "no\xa0break", "tag\U000e0001", "àáâãäåæçèé", "😀\uffff", "\ud800x",
                 "A" * 64]


@pytest.mark.parametrize("name", ["shakespeare", "odd_d_head_tied"])
def test_text_is_refused_in_the_kernels_own_words(page_of_models, name):
    model = MODELS[name]
    texts = HOSTILE_TEXTS + ([] if model.config.V == 65 else ["abc", "\n !$z"])  # in the course's vocabulary, not V's
    kernel = []
    for text in texts:
        sentences = set()
        for path in (stream_run,) + ((attention_run,) if model.config.V == 65 else ()):
            try:
                path(model, text)
                sentences.add(None)
            except ValueError as error:
                sentences.add(str(error))
        assert len(sentences) == 1, (text, sentences)  # both explorers say the same
        kernel.append(sentences.pop())
    page = page_of_models.evaluate("""async ([weightsUrl, texts]) => {
        const gpt = await import("/gpt.js");
        const model = gpt.readWeights(await (await fetch(weightsUrl)).arrayBuffer());
        return texts.map((text) => {
            try { gpt.encode(model, text); return null; }
            catch (error) { return error instanceof gpt.TextError ? error.message : `not a TextError: ${error}`; }
        });
    }""", [f"/w/{name}.gptw", texts])
    assert page == kernel
    read = [text for text, sentence in zip(texts, kernel) if sentence is None]
    assert read == (["A" * 64] if model.config.V == 65 else [])  # every other text breaks a rule


# Bad weights files: each refused by readWeights (or fetchWeights) with a WeightsError of one sentence.
def corrupted_files() -> dict[str, tuple[bytes, str]]:
    """name -> (file, words its sentence must hold)."""
    import json
    import struct

    good = page_weights(MODELS["induction"])
    (n,) = struct.unpack("<I", good[4:8])
    header = json.loads(good[8 : 8 + n])
    start = -(-(8 + n) // 4) * 4

    def rewritten(change) -> bytes:
        changed = copy.deepcopy(header)
        change(changed)
        text = json.dumps(changed).encode()
        head = b"GPTW" + struct.pack("<I", len(text)) + text
        return head + b"\0" * (-len(head) % 4) + good[start:]

    nan_at = start + next(t["offset"] for t in header["tensors"] if t["name"] == "blocks.1.attn.W_V") + 4 * 7
    return {
        "empty": (b"", "empty (0 bytes)"),
        "cut in its first 8 bytes": (good[:6], "truncated: it ends at byte 6 of its first 8"),
        "a weight listed twice": (rewritten(lambda h: h["tensors"].append(h["tensors"][0])), "lists weight E twice"),
        "not ours": (b"PK\x03\x04" + bytes(100), 'does not start with "GPTW"'),
        "header cut": (good[:40], "truncated: its header claims"),
        "data cut": (good[: len(good) - 1000], "truncated: weight blocks.1.attn.W_O ends at byte"),
        "header garbled": (good[:20] + b"\xff\xfe" + good[22:], "header is not UTF-8 JSON"),
        "trailing bytes": (good + bytes(8), "8 bytes follow its last weight"),
        "another format": (rewritten(lambda h: h.update(format=2)), "has format 2; this page reads format 1"),
        "shape against config": (rewritten(lambda h: h["config"].update(d=32)),
                                 "weight E has shape [65,64] in the file; a model of this config needs [65,32]"),
        "config invalid": (rewritten(lambda h: h["config"].update(H=5)), "H = 5 does not divide d = 64"),
        "weight missing": (rewritten(lambda h: h["tensors"].pop()), "it needs 19 weights, the file lists 18"),
        "weight renamed": (rewritten(lambda h: h["tensors"][-1].update(name="ln_f.bias")),
                           'missing ["ln_f.beta"], unexpected ["ln_f.bias"]'),
        "a config of a million blocks": (rewritten(lambda h: h["config"].update(L=10**6)),
                                         "it needs 7000005 weights, the file lists 19"),
        "a NaN weight": (good[:nan_at] + struct.pack("<f", float("nan")) + good[nan_at + 4 :],
                         "weight blocks.1.attn.W_V holds 1 non-finite values (NaN or inf)"),
    }


def test_a_bad_weights_file_is_refused_in_one_sentence(page_of_models):
    files = corrupted_files()
    for name, (body, _) in files.items():
        page_of_models.serve(f"/bad/{name.replace(' ', '-')}.gptw", body)
    page_of_models.serve("/w/induction-again.gptw", page_weights(MODELS["induction"]))
    refusals = page_of_models.evaluate("""async ([names, course]) => {
        const gpt = await import("/gpt.js");
        const refusal = async (load) => {
            try { await load(); return "accepted"; }
            catch (error) { return error instanceof gpt.WeightsError ? error.message : `not a WeightsError: ${error}`; }
        };
        const found = {};
        for (const name of names) found[name] = await refusal(() => gpt.fetchWeights(`/bad/${name.replaceAll(" ", "-")}.gptw`));
        found["missing"] = await refusal(() => gpt.fetchWeights("/bad/no-such-file.gptw"));
        found["not bytes"] = await refusal(() => gpt.readWeights(null));
        found["another model"] = await refusal(() => gpt.fetchWeights("/w/induction-again.gptw", course));
        found["good"] = await refusal(() => gpt.fetchWeights("/w/induction-again.gptw"));
        return found;
    }""", [list(files), {k: v for k, v in vars(MODELS["shakespeare"].config).items()}])
    expected = {name: words for name, (_, words) in files.items()}
    expected.update({"missing": "is missing (HTTP 404)", "not bytes": "an ArrayBuffer), got null",
                     "another model": "of another model: its config differs in d 64 (file) vs 128 (expected), L 2"})
    assert refusals.pop("good") == "accepted"
    for name, words in expected.items():
        sentence = refusals[name]
        assert words in sentence, (name, sentence)
        assert sentence.count(". ") == 0 and "\n" not in sentence and not sentence.startswith("not a "), (name, sentence)


def test_weights_from_a_view_at_any_offset_and_typed_text_read_the_same(page_of_models):
    """anywidget hands binary traits over as DataViews, not necessarily 4-byte aligned; and bad arguments
    to encode and Session.run are refused in a sentence."""
    same, refusals = page_of_models.evaluate("""async () => {
        const gpt = await import("/gpt.js");
        const bytes = new Uint8Array(await (await fetch("/w/induction.gptw")).arrayBuffer());
        const shifted = new Uint8Array(bytes.length + 1);
        shifted.set(bytes, 1);
        const logits = (model) => Array.from(new gpt.Session(model).run(gpt.encode(model, "abcab")).logits);
        const reference = JSON.stringify(logits(gpt.readWeights(bytes.buffer)));
        const views = [shifted.subarray(1), new DataView(shifted.buffer, 1), bytes];
        const model = gpt.readWeights(bytes.buffer), said = [];
        for (const bad of [() => gpt.encode(model, 42), () => new gpt.Session(model).run("abc"),
                           () => new gpt.Session(model).run([1, 2, 99])]) {
            try { bad(); said.push("accepted"); } catch (error) { said.push(`${error.name}: ${error.message}`); }
        }
        return [views.map((view) => JSON.stringify(logits(gpt.readWeights(view))) === reference), said];
    }""")
    assert same == [True, True, True]
    assert refusals == ["TextError: the text must be a string, got number",
                        "RangeError: tokens must be an array of token ids (encode's Int32Array), got abc",
                        "RangeError: token ids must lie in [0, V) = [0, 65), got 99"]


@torch.no_grad()
def test_write_norms_are_the_attention_explorers(page_of_models):
    model, text = MODELS["shakespeare"], TEXTS["shakespeare"][1]
    expected = attention_run(model, text).write_norms.double().numpy()  # (L, H, T)
    norms = page_of_models.evaluate("""async ([text]) => {
        const gpt = await import("/gpt.js");
        const model = gpt.readWeights(await (await fetch("/w/shakespeare.gptw")).arrayBuffer());
        const run = new gpt.Session(model).run(gpt.encode(model, text));
        return run.writes.heads.map((_, l) => Array.from(gpt.writeNorms(run, l)));
    }""", [text])
    assert np.abs(np.array(norms).reshape(expected.shape) - expected).max() <= RELATIVE_TOLERANCE * (1 + expected.max())
