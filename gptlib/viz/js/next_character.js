// The next-character explorer (gptlib.viz.next_character.NextCharacterExplorer), run in the page: the model
// (gpt.js, inpage.js) reads the prompt, and the bars show softmax(z_T / temperature) over the top-k
// characters; the sample is drawn character by character from a seeded generator (mulberry32), so the same
// seed gives the same sample in any page. Until the weights are read (and in a saved copy with none), the
// bars show the kernel's numbers.

const BAR_WIDTH = 11; // CSS px per character
const BARS_LEFT = 40;
const BARS_HEIGHT = 190;
const BARS_PLOT = { top: 10, bottom: 160 };
const TEMPERATURE_MAX = 10; // as gptlib.viz.next_character.TEMPERATURE_MAX
const SEED_MAX = 4294967295; // 2^32 - 1

// mulberry32: a seeded generator of 32-bit states, uniform numbers in [0, 1)
function mulberry32(seed) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// softmax(z / temperature) (V,) in float64 over the top_k largest logits (ties: the earlier character
// first), every other character at 0: gptlib.viz.next_character.next_character_distribution.
export function distribution(z, temperature, topK) {
  const V = z.length, order = [...z.keys()].sort((a, b) => z[b] - z[a] || a - b), kept = order.slice(0, topK);
  const largest = z[order[0]], p = new Float64Array(V);
  let total = 0;
  for (const k of kept) { p[k] = Math.exp((z[k] - largest) / temperature); total += p[k]; }
  for (const k of kept) p[k] /= total;
  return p;
}

// The index a uniform u in [0, 1) picks from probabilities p (the last kept character if rounding leaves u past the sum).
function pick(p, u) {
  let sum = 0, last = 0;
  for (let k = 0; k < p.length; k++) {
    if (p[k] === 0) continue;
    sum += p[k];
    last = k;
    if (u < sum) return k;
  }
  return last;
}

// A number in the words of gptlib.validation.real ("0.0", "-1.5", "1e+200"), as Python's repr writes a float
function pythonFloat(x) {
  if (Number.isInteger(x) && Math.abs(x) < 1e16) return x.toFixed(1);
  const text = String(x);
  return text.replace(/e([+-])(\d)$/, "e$10$2");
}

function render({ model, el }) {
  const { root, text, textId } = modelExplorer(model, el, "next");
  const vocabulary = [...model.get("vocabulary")], V = vocabulary.length;
  const status = statusLine("gptlib-next-message", 2);
  const temperatureId = uniqueId("next-temperature");
  const temperatureSlider = h("input", { type: "range", id: temperatureId, min: 0.05, max: 3, step: 0.05, class: "gptlib-range" });
  const temperatureBox = h("input", { type: "text", inputmode: "decimal", size: 6, class: "gptlib-number", "aria-label": "temperature, exact value" });
  const topKId = uniqueId("next-top-k");
  const topKSlider = h("input", { type: "range", id: topKId, min: 1, max: V, step: 1, class: "gptlib-range" });
  const topKBox = h("input", { type: "text", inputmode: "numeric", size: 6, class: "gptlib-number", "aria-label": "top-k, exact value" });
  const seedId = uniqueId("next-seed");
  const seedBox = h("input", { type: "text", id: seedId, inputmode: "numeric", size: 10, class: "gptlib-number" });
  const sampleButton = h("button", { type: "button", class: "gptlib-preset gptlib-next-sample-button", text: "sample" });
  const sample = h("output", { class: "gptlib-readout gptlib-next-sample", style: "white-space: pre-wrap; font-family: monospace; display: block" });
  const bars = sharpCanvas(BARS_LEFT + V * BAR_WIDTH + 10, BARS_HEIGHT, "");
  bars.canvas.classList.add("gptlib-next-bars");
  const stage = h("div", { class: "gptlib-stage" }, [bars.canvas]);
  const tip = hoverReadout(stage);
  root.append(
    h("div", { class: "gptlib-text-row" }, [h("label", { for: textId, text: "prompt" }), text]),
    h("div", { class: "gptlib-columns" }, [
      h("div", { class: "gptlib-control gptlib-next-temperature" }, [h("label", { for: temperatureId, text: "temperature" }), temperatureSlider, temperatureBox]),
      h("div", { class: "gptlib-control gptlib-next-top-k" }, [h("label", { for: topKId, text: "top-k" }), topKSlider, topKBox]),
      h("div", { class: "gptlib-choices gptlib-next-seed" }, [h("label", { for: seedId, text: "seed" }), seedBox, sampleButton]),
    ]),
    status, stage, sample,
  );

  const settings = { temperature: model.get("temperature"), topK: model.get("top_k"), seed: model.get("seed") };
  let logits = null; // the page's run: z_T (V,) of the prompt, float32
  let p = null; // the probabilities drawn (V,)
  let stale = false;
  let prompt = text.value;

  function showSettings() {
    temperatureSlider.value = String(settings.temperature);
    temperatureSlider.setAttribute("aria-valuetext", String(settings.temperature));
    if (document.activeElement !== temperatureBox) temperatureBox.value = String(settings.temperature);
    topKSlider.value = String(settings.topK);
    topKSlider.setAttribute("aria-valuetext", `${settings.topK} of ${V} characters`);
    if (document.activeElement !== topKBox) topKBox.value = String(settings.topK);
    if (document.activeElement !== seedBox) seedBox.value = String(settings.seed);
  }

  function draw() {
    if (!p) return;
    const c = bars.context;
    probabilityAxis(c, BARS_LEFT + V * BAR_WIDTH + 10, BARS_HEIGHT, BARS_LEFT - 4, BARS_PLOT.top, BARS_PLOT.bottom);
    const labels = tokenLabels(vocabulary.join(""));
    c.textAlign = "center";
    c.font = "10px monospace";
    let best = 0;
    for (let k = 0; k < V; k++) {
      if (p[k] > p[best]) best = k;
      const x = BARS_LEFT + k * BAR_WIDTH, height = p[k] * (BARS_PLOT.bottom - BARS_PLOT.top);
      c.fillStyle = "#1565c0";
      c.fillRect(x + 1, BARS_PLOT.bottom - height, BAR_WIDTH - 2, height);
      c.fillStyle = "#1a1a1a";
      c.fillText(labels[k], x + BAR_WIDTH / 2, BARS_PLOT.bottom + 12);
    }
    c.textAlign = "left";
    c.font = "10px sans-serif";
    c.fillText("next character: a bar per character of the vocabulary at its probability", BARS_LEFT, BARS_PLOT.bottom + 26);
    const order = [...p.keys()].sort((a, b) => p[b] - p[a] || a - b).slice(0, 5);
    bars.canvas.setAttribute("aria-label", `The next character after the prompt: a bar per character; the likeliest ` +
      order.map((k) => `'${labels[k]}' ${p[k].toFixed(2)}`).join(", "));
    bars.canvas.classList.toggle("gptlib-stale", stale);
    if (!stale) say(status, `${prompt.length} characters, temperature ${settings.temperature}, top-k ${settings.topK}: most likely '${labels[best]}'`);
    root.gptlibData = { T: [...prompt].length, logits, probabilities: p, temperature: settings.temperature, topK: settings.topK };  // for the browser tests
  }
  const redraw = frameScheduler(root, draw);

  function recompute() {
    if (!logits) return;
    p = distribution(logits, settings.temperature, settings.topK);
    redraw();
  }
  function ran(run, typed) {
    const Vm = run.logits.length / run.T;
    logits = Array.from(run.logits.subarray((run.T - 1) * Vm, run.T * Vm));
    prompt = typed;
    stale = false;
    recompute();
  }
  function refused(reason) {
    stale = true;
    say(status, cannotDraw(reason, p !== null), true);
    redraw();
  }
  function receive() {
    if (typing.state.ready) return;
    const view = model.get("probs");
    if (view && view.byteLength) p = Float64Array.from(new Uint8Array(view.buffer, view.byteOffset, view.byteLength), (v) => v / 255);
    redraw();
  }
  function fromKernel() {
    if (typing.state.ready) return;
    stale = model.get("stale");
    if (stale) say(status, model.get("message"), true);
    redraw();
  }

  // a setting typed or slid: checked here in the kernel's words (gptlib.validation), sent to the kernel where there is one
  function set(name, value) {
    Object.assign(settings, { [name]: value });
    showSettings();
    recompute();
    if (model.get("live")) commit(model, { [{ temperature: "temperature", topK: "top_k", seed: "seed" }[name]]: value });
  }
  function typedSetting(box, name, read) {
    let value;
    try {
      value = read(box.value.trim());
    } catch (error) {
      stale = true;
      say(status, `Cannot draw: ${error.message} (the picture still shows the last valid input).`, true);
      redraw();
      return;
    }
    if (typing.state.ready || !model.get("live")) stale = false;
    set(name, value);
  }
  const readTemperature = (typed) => {
    const value = typedNumber("temperature", typed);
    if (!(value > 0 && value <= TEMPERATURE_MAX)) throw new Error(`temperature must be a finite number > 0 and <= ${pythonFloat(TEMPERATURE_MAX)}, got ${pythonFloat(value)}`);
    return value;
  };
  const integer = (name, low, high) => (typed) => {
    const rule = `${name} must be an integer in [${low}, ${high}]`;
    if (!/^[+-]?\d+$/.test(typed)) throw new Error(`${rule}, got '${shown(typed)}'`);
    const value = Number(typed);
    if (value < low || value > high) throw new Error(`${rule}, got ${typed}`);
    return value;
  };
  const readTopK = integer("top_k", 1, V), readSeed = integer("seed", 0, SEED_MAX);
  for (const [box, name, read] of [[temperatureBox, "temperature", readTemperature], [topKBox, "topK", readTopK], [seedBox, "seed", readSeed]]) {
    box.addEventListener("change", () => typedSetting(box, name, read));
    box.addEventListener("keydown", (event) => { if (event.key === "Enter") typedSetting(box, name, read); });
  }
  temperatureSlider.addEventListener("input", () => set("temperature", Number(temperatureSlider.value)));
  topKSlider.addEventListener("input", () => set("topK", Number(topKSlider.value)));

  // A sample: from the prompt, one character after another drawn from the bars' distribution, until T_max.
  sampleButton.addEventListener("click", () => {
    if (!typing.state.ready || stale) {
      say(status, typing.state.ready ? "Cannot sample: the prompt or a setting cannot be read." : "Cannot sample: the model is not loaded in this page.", true);
      return;
    }
    const { gpt, weights, session } = typing.state, random = mulberry32(settings.seed);
    const tokens = Array.from(gpt.encode(weights, prompt));
    let drawn = "";
    while (tokens.length < weights.config.T_max) {
      const run = session.run(Int32Array.from(tokens)), Vm = run.logits.length / run.T;
      const next = pick(distribution(Array.from(run.logits.subarray((run.T - 1) * Vm)), settings.temperature, settings.topK), random());
      tokens.push(next);
      drawn += vocabulary[next];
    }
    sample.textContent = `${prompt}${drawn}`;
    root.dataset.sample = drawn;
    say(status, `sampled ${drawn.length} characters with seed ${settings.seed}, temperature ${settings.temperature}, top-k ${settings.topK}`);
  });

  const typing = typedText(model, text, { ran, refused, said: (sentence) => say(status, sentence, true) });
  for (const key of ["temperature", "top_k", "seed"]) {
    model.on(`change:${key}`, () => {
      Object.assign(settings, { temperature: model.get("temperature"), topK: model.get("top_k"), seed: model.get("seed") });
      showSettings();
      recompute();
    });
  }
  model.on("change:probs", receive);
  for (const key of ["stale", "message"]) model.on(`change:${key}`, fromKernel);
  showSettings();
  if (!model.get("live") && !model.get("weights")) sampleButton.disabled = true;
  return start(model, [text, temperatureBox, topKBox, seedBox], receive, fromKernel);
}

export default { render };
