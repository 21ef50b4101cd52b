// The attention explorer (gptlib.viz.attention.AttentionExplorer), drawn in the page. For the current
// text, every layer's and head's A^h and write norms come from the kernel in one binary message, or
// from the model run in the page (inpage.js) for a text typed there; switching layer or head, hovering
// and the all-heads view never ask the kernel.

const SIDE = 440; // CSS px of A^h's square
const MARGIN = 26; // room for the characters along both sides
const NORM_COLUMN = 22; // CSS px per head in the write-norm map
const SMALL = 72; // CSS px of one head in the all-heads view

const CLEAR_WIN = 1e-3; // as gptlib.viz.attention.CLEAR_WIN

// The text alternative of A^h (T labels, weight(t, s) its entries), in the words of
// gptlib.viz.attention.describe_view: each query's strongest key, or ? where the two largest
// weights of its row are within CLEAR_WIN (which of them wins is rounding's choice).
export function describeView(labels, layer, head, weight) {
  const strongest = labels.map((label, t) => {
    let best = -Infinity, second = labels.length > 1 ? -Infinity : 0, key = 0;
    labels.forEach((_, s) => {
      const w = weight(t, s);
      if (w > best) [second, best, key] = [best, w, s];
      else if (w > second) second = w;
    });
    return `${label}→${best - second > CLEAR_WIN ? labels[key] : "?"}`;
  });
  return `Attention pattern A^h of layer ${layer}, head ${head} over ${labels.length} characters, beside every head's ` +
    `write norm; each query's strongest key (? where the top two weights are within ${formatG(CLEAR_WIN)}): ${strongest.join(" ")}`;
}

// The value a layer or head slider reads out: "layer 0 (of 0 to 3)" for four layers, counted from 0
// as the titles and the kernel count them.
export function positionText(what, index, count) {
  return `${what} ${index} (of 0 to ${count - 1})`;
}

function floats(view) {
  return new Float32Array(view.buffer.slice(view.byteOffset, view.byteOffset + view.byteLength));
}

// viridis, sampled at 9 points and interpolated (the kernel's PNG uses matplotlib's viridis)
const VIRIDIS = [[68, 1, 84], [71, 44, 122], [59, 81, 139], [44, 113, 142], [33, 144, 141], [39, 173, 129],
  [92, 200, 99], [170, 220, 50], [253, 231, 37]];
const LEVELS = 256;
const VIRIDIS_TABLE = Array.from({ length: LEVELS }, (_, n) => {
  const t = (n / (LEVELS - 1)) * (VIRIDIS.length - 1);
  const i = Math.min(Math.floor(t), VIRIDIS.length - 2), f = t - i;
  return VIRIDIS[i].map((v, k) => Math.round(v + f * (VIRIDIS[i + 1][k] - v)));
});
const GREY_TABLE = Array.from({ length: LEVELS }, (_, n) => { const v = LEVELS - 1 - n; return [v, v, v]; });

// A rows x columns grid of values in [0, 1] painted at (x, y, width, height) of a 2-D context:
// one pixel per cell in an ImageData, then scaled up without smoothing (sharp cells, one draw).
function paintGrid(context, rows, columns, valueAt, table, x, y, width, height) {
  const pixels = new ImageData(columns, rows);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < columns; c++) {
      const level = Math.round(Math.min(Math.max(valueAt(r, c), 0), 1) * (LEVELS - 1));
      const [red, green, blue] = table[level], at = 4 * (r * columns + c);
      pixels.data[at] = red; pixels.data[at + 1] = green; pixels.data[at + 2] = blue; pixels.data[at + 3] = 255;
    }
  }
  const cells = document.createElement("canvas");
  cells.width = columns;
  cells.height = rows;
  cells.getContext("2d").putImageData(pixels, 0, 0);
  context.imageSmoothingEnabled = false;
  context.drawImage(cells, x, y, width, height);
}

function render({ model, el }) {
  const { root, text, textId } = modelExplorer(model, el, "attn");
  const layer = h("input", { type: "range", min: 0, step: 1, "aria-label": "layer l", class: "gptlib-range" });
  const head = h("input", { type: "range", min: 0, step: 1, "aria-label": "head h", class: "gptlib-range" });
  const layerShown = h("output", { class: "gptlib-number-shown" });
  const headShown = h("output", { class: "gptlib-number-shown" });
  const status = statusLine("gptlib-attn-message", 2);
  const heat = sharpCanvas(SIDE + MARGIN, SIDE + MARGIN, "");
  heat.canvas.classList.add("gptlib-attn-output");
  const normsCanvas = sharpCanvas(1, 1, "");
  const stage = h("div", { class: "gptlib-stage" }, [heat.canvas]);
  const normStage = h("div", { class: "gptlib-stage" });
  const tip = hoverReadout(stage);
  const normTip = hoverReadout(normStage);
  const normTitle = h("div", { class: "gptlib-readout" });
  const heads = h("div", { class: "gptlib-heads", role: "group", "aria-label": "all heads of this layer: choose one" });
  root.append(
    h("div", { class: "gptlib-text-row" }, [h("label", { for: textId, text: "text" }), text]),
    h("div", { class: "gptlib-columns" }, [
      h("div", { class: "gptlib-control gptlib-attn-layer" }, [h("span", { text: "layer l" }), layer, layerShown]),
      h("div", { class: "gptlib-control gptlib-attn-head" }, [h("span", { text: "head h" }), head, headShown]),
    ]),
    status,
    h("div", { class: "gptlib-columns" }, [
      h("div", {}, [h("div", { class: "gptlib-attn-title" }), stage]),
      h("div", {}, [h("div", { text: "each head's write ‖(A^h X W_OV^h)_t‖ at row t" }), normStage, normTitle]),
    ]),
    heads,
  );
  const title = root.querySelector(".gptlib-attn-title");

  let data = null; // {L, H, T, A, norms, labels}
  let stale = false;

  function receive() {
    const [L, H, T] = model.get("shape");
    if (!T || typing.state.ready) return;  // the page runs the model: the kernel's numbers are the same
    use({ L, H, T, A: floats(model.get("A")), norms: floats(model.get("norms")), labels: model.get("labels") });
  }

  // A run of the model in the page: A^h of every layer and head, and each head's write norm at each position.
  function ran(run, typed) {
    const { L, H } = typing.state.weights.config, T = run.T;
    const A = new Float32Array(L * H * T * T), norms = new Float32Array(L * H * T);
    for (let l = 0; l < L; l++) {
      for (let i = 0; i < H; i++) A.set(run.attention[l][i], (l * H + i) * T * T);
      norms.set(typing.state.gpt.writeNorms(run, l), l * H * T);  // (H, T)
    }
    stale = false;
    use({ L, H, T, A, norms, labels: tokenLabels(typed) });
  }
  function refused(reason) {
    stale = true;
    say(status, cannotDraw(reason, data !== null), true);
    redraw();
  }

  function use(numbers) {
    const sameShape = data && data.L === numbers.L && data.H === numbers.H;
    data = numbers;
    root.gptlibData = data;  // the numbers drawn, for the browser tests
    if (!sameShape) build();
    redraw();
  }

  // the controls and canvases that depend on L and H alone (kept from text to text)
  function build() {
    const { L, H } = data;
    layer.max = String(L - 1);
    head.max = String(H - 1);
    layer.value = String(Math.min(model.get("layer"), L - 1));
    head.value = String(Math.min(model.get("head"), H - 1));
    normStage.replaceChildren();
    const fresh = sharpCanvas(H * NORM_COLUMN + 30, SIDE + MARGIN, "");
    normsCanvas.canvas = fresh.canvas;
    normsCanvas.context = fresh.context;
    fresh.canvas.classList.add("gptlib-attn-norms");
    normStage.append(fresh.canvas, normTip.element);
    fresh.canvas.addEventListener("mousemove", hoverNorms);
    fresh.canvas.addEventListener("mouseleave", () => normTip.hide());
    fresh.canvas.addEventListener("click", (event) => {
      const h_ = Math.floor((event.offsetX - 30) / NORM_COLUMN);
      if (h_ >= 0 && h_ < data.H) choose(Number(layer.value), h_);
    });
    heads.replaceChildren(...Array.from({ length: H }, (_, i) => {
      const small = sharpCanvas(SMALL, SMALL, "");
      const button = h("button", { type: "button", class: "gptlib-head-button", "aria-pressed": "false" }, [small.canvas, h("div", { text: `head ${i}` })]);
      button.addEventListener("click", () => choose(Number(layer.value), i));
      button.small = small;
      return button;
    }));
  }

  const A = (l, hh, t, s) => data.A[((l * data.H + hh) * data.T + t) * data.T + s];
  const norm = (l, hh, t) => data.norms[(l * data.H + hh) * data.T + t];
  const quoted = (t) => `'${data.labels[t]}'`;

  function draw() {
    if (!data) return;
    const l = Number(layer.value), hh = Number(head.value), T = data.T;
    layerShown.textContent = String(l);
    headShown.textContent = String(hh);
    layer.setAttribute("aria-valuetext", positionText("layer", l, data.L));
    head.setAttribute("aria-valuetext", positionText("head", hh, data.H));
    const c = heat.context, cell = SIDE / T;
    c.fillStyle = "#ffffff";
    c.fillRect(0, 0, SIDE + MARGIN, SIDE + MARGIN);
    paintGrid(c, T, T, (t, s) => A(l, hh, t, s), VIRIDIS_TABLE, MARGIN, 0, SIDE, SIDE);
    c.fillStyle = "#1a1a1a";
    c.font = `${Math.min(12, Math.max(7, cell - 1))}px monospace`;
    c.textAlign = "center";
    c.textBaseline = "middle";
    for (let t = 0; t < T; t++) {
      c.fillText(data.labels[t], MARGIN / 2, (t + 0.5) * cell);
      c.fillText(data.labels[t], MARGIN + (t + 0.5) * cell, SIDE + MARGIN / 2);
    }
    title.textContent = `A^h for layer ${l}, head h = ${hh}: row t is query t's attention over keys s (sums to 1; colour 0 → 1)`;
    heat.canvas.setAttribute("aria-label", describeView(data.labels, l, hh, (t, s) => A(l, hh, t, s)));
    heat.canvas.classList.toggle("gptlib-stale", stale);

    // the write norms of every head of this layer, on this layer's own scale
    let largest = 1e-12;
    for (let i = 0; i < data.H; i++) for (let t = 0; t < T; t++) largest = Math.max(largest, norm(l, i, t));
    const n = normsCanvas.context;
    n.fillStyle = "#ffffff";
    n.fillRect(0, 0, data.H * NORM_COLUMN + 30, SIDE + MARGIN);
    paintGrid(n, T, data.H, (t, i) => norm(l, i, t) / largest, GREY_TABLE, 30, 0, data.H * NORM_COLUMN, SIDE);
    n.strokeStyle = "#d9730d";
    n.lineWidth = 2.5;
    n.strokeRect(30 + hh * NORM_COLUMN + 1, 1, NORM_COLUMN - 2, SIDE - 2);
    n.fillStyle = "#1a1a1a";
    n.font = "11px sans-serif";
    n.textAlign = "center";
    for (let i = 0; i < data.H; i++) n.fillText(String(i), 30 + (i + 0.5) * NORM_COLUMN, SIDE + MARGIN / 2);
    normTitle.textContent = `white 0 → black ${largest.toFixed(2)} (the largest write in layer ${l}); click a column to focus that head`;
    normsCanvas.canvas.setAttribute("aria-label", `Write norms of the ${data.H} heads of layer ${l} at each of ${T} positions, largest ${largest.toFixed(2)}`);

    for (const [i, button] of [...heads.children].entries()) {
      const { context, canvas } = button.small;
      paintGrid(context, T, T, (t, s) => A(l, i, t, s), VIRIDIS_TABLE, 0, 0, SMALL, SMALL);
      canvas.setAttribute("aria-hidden", "true");
      button.setAttribute("aria-label", `layer ${l}, head ${i}`);
      button.setAttribute("aria-pressed", String(i === hh));
    }
    if (!stale) say(status, `${T} characters, layer ${l}, head ${hh}`);
  }
  const redraw = frameScheduler(root, draw);

  function choose(l, hh) {
    layer.value = String(l);
    head.value = String(hh);
    redraw();
    commit(model, { layer: l, head: hh });
  }
  layer.addEventListener("input", () => choose(Number(layer.value), Number(head.value)));
  head.addEventListener("input", () => choose(Number(layer.value), Number(head.value)));

  const typing = typedText(model, text, { ran, refused, said: (sentence) => say(status, sentence, true) });

  heat.canvas.addEventListener("mousemove", (event) => {
    if (!data) return;
    const cell = SIDE / data.T, s = Math.floor((event.offsetX - MARGIN) / cell), t = Math.floor(event.offsetY / cell);
    if (s < 0 || t < 0 || s >= data.T || t >= data.T) return tip.hide();
    const weight = A(Number(layer.value), Number(head.value), t, s);
    tip.show(event.offsetX, event.offsetY, `query ${t} ${quoted(t)} → key ${s} ${quoted(s)}: weight ${weight.toFixed(3)}`);
  });
  heat.canvas.addEventListener("mouseleave", () => tip.hide());
  function hoverNorms(event) {
    if (!data) return;
    const cell = SIDE / data.T, i = Math.floor((event.offsetX - 30) / NORM_COLUMN), t = Math.floor(event.offsetY / cell);
    if (i < 0 || t < 0 || i >= data.H || t >= data.T) return normTip.hide();
    normTip.show(event.offsetX, event.offsetY, `head ${i}, position ${t} ${quoted(t)}: write norm ${norm(Number(layer.value), i, t).toFixed(3)}`);
  }

  function fromKernel() {
    if (typing.state.ready) return;  // the page says what it runs
    stale = model.get("stale");
    if (stale) say(status, model.get("message"), true);
    redraw();
  }
  model.on("change:A", receive); // the kernel sets A, norms, labels and shape in one message
  for (const key of ["stale", "message"]) model.on(`change:${key}`, fromKernel);
  model.on("change:layer", () => { layer.value = String(model.get("layer")); redraw(); });
  model.on("change:head", () => { head.value = String(model.get("head")); redraw(); });
  return start(model, [text], receive, fromKernel);
}

export default { render };
