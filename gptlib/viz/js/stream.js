// The stream explorer (gptlib.viz.stream.StreamExplorer), drawn in the page. For the current text,
// every write's direct contribution at every position (to the predicted, the true next and the
// chosen character's logits) with every head's A^h and the words of every picture's text
// alternative come from the kernel, or from the model run in the page (inpage.js) for a text or
// character typed there, described here in the kernel's words (describeAttribution, rowWords);
// moving the position, the mode or the head, hovering and focusing never ask the kernel.

const MODES = ["predicted", "difference", "character"]; // as gptlib.viz.stream.MODES
const BAR = 16; // CSS px per bar
const GAP = 10; // CSS px between layers
const LEFT = 44; // room for the scale
const CHART_HEIGHT = 230;
const PLOT = { top: 12, bottom: 172 }; // the bars' area, y in CSS px
const ROW_HEIGHT = 150;
const ROW_WIDTH = 640;
const CELL = "padding: 1px 10px"; // a cell of the numbers' table

// a binary trait (a DataView) as a typed array of its own bytes
function array(view, Type) {
  return new Type(view.buffer.slice(view.byteOffset, view.byteOffset + view.byteLength));
}

// "L2H1" -> [2, 1]; any other write (E[x], P, L0 b_O, L0 MLP) -> null
function headOf(label) {
  const match = /^L(\d+)H(\d+)$/.exec(label);
  return match ? [Number(match[1]), Number(match[2])] : null;
}
// the short name under a bar, and the layer its group belongs to (-1: the embeddings)
function shortName(label) {
  if (label === "E[x]") return "E";
  const head = headOf(label);
  if (head) return String(head[1]);
  return label.endsWith("MLP") ? "M" : label.endsWith("b_O") ? "b" : label;
}
function layerOf(label) {
  const match = /^L(\d+)/.exec(label);
  return match ? Number(match[1]) : -1;
}

// The words of gptlib.viz.stream: quoted, the title of the bars, describe_attribution and row_words.
const inQuotes = (label) => `'${label}'`;
const signed = (x) => `${x >= 0 ? "+" : ""}${x.toFixed(2)}`;
function title(vocabulary, labels, mode, t, predicted, trueNext, token) {
  const z = (k) => `z(${inQuotes(tokenLabels(vocabulary[k])[0])})`;
  const target = mode === "character" ? z(token) : mode === "predicted" ? `${z(predicted[t])} (the prediction)`
    : `${z(predicted[t])} - ${z(trueNext[t])} (prediction minus true next)`;
  return `Direct contributions to ${target} at position ${t} after ${inQuotes(labels[t])}`;
}
function describeAttribution(writes, values, rest, logit, heading, quantity) {
  const top = writes.map((label, i) => [label, values[i]]).sort((a, b) => Math.abs(b[1]) - Math.abs(a[1])).slice(0, 3);
  return `${heading}: a bar per write into the stream (${writes.length} writes); the largest in size are ` +
    top.map(([label, v]) => `${label} (${signed(v)})`).join(", ") +
    `; with LN_f's bias (${signed(rest)}) they add up to the ${quantity} ${signed(logit)}.`;
}
function rowWords(labels, l, hh, t, row) {  // row: the weights of keys 0..t
  const keys = [...row.keys()].sort((a, b) => row[b] - row[a] || a - b).slice(0, 3);
  const strongest = keys.map((s) => `${s} ${inQuotes(labels[s])} ${row[s].toFixed(2)}`).join(", ");
  return `L${l}H${hh} at query ${t} ${inQuotes(labels[t])}, strongest keys: ${strongest}.`;
}
// Python's repr of a short str, as the kernel's refusal of a character quotes it
function pythonRepr(text) {
  const quote = text.includes("'") && !text.includes('"') ? '"' : "'";
  const escaped = text.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/\t/g, "\\t").replace(/\r/g, "\\r");
  return quote + (quote === "'" ? escaped.replace(/'/g, "\\'") : escaped) + quote;
}

function render({ model, el }) {
  const { root, text, textId } = modelExplorer(model, el, "stream");
  const positionId = uniqueId("stream-position");
  const position = h("input", { type: "range", id: positionId, min: 0, step: 1, class: "gptlib-range" });
  const positionShown = h("output", { for: positionId, class: "gptlib-number-shown" });
  const modeName = uniqueId("stream-mode");
  const radios = {};
  const character = h("input", {
    type: "text", size: 2, class: "gptlib-stream-character", spellcheck: "false", "aria-label": "character whose logit to split",
  });
  character.value = model.get("character");
  const modeLabels = { predicted: "predicted", difference: "predicted − true next", character: "character" };
  // a row like the other explorers' groups (the sphere's view presets): its name, then the choices,
  // each radio inside its label, spaced by the layout, not by blanks in the text
  const mode = h("div", { class: "gptlib-choices gptlib-stream-mode", role: "radiogroup", "aria-label": "token" }, [
    h("span", { text: "token:" }),
    ...MODES.map((m) => {
      radios[m] = h("input", { type: "radio", name: modeName, value: m });
      return h("label", {}, [radios[m], modeLabels[m]]);
    }),
    character,
  ]);
  const status = statusLine("gptlib-stream-message", 2);
  const captionId = uniqueId("stream-caption");
  const bars = sharpCanvas(1, 1, "");
  const stage = h("div", { class: "gptlib-stage" });
  const tip = hoverReadout(stage);
  const caption = h("div", { id: captionId, class: "gptlib-readout gptlib-stream-caption" });
  const readout = h("div", { class: "gptlib-readout gptlib-stream-readout" });
  // every bar's number, for a keyboard or a screen reader as for the pointer (closed until asked for)
  const rows = h("tbody");
  const table = h("details", { class: "gptlib-stream-numbers" }, [
    h("summary", { text: "every bar as a number" }),
    h("table", { style: "border-collapse: collapse; font-variant-numeric: tabular-nums" }, [
      h("thead", {}, [h("tr", {}, [h("th", { scope: "col", text: "write" }), h("th", { scope: "col", text: "direct contribution" })])]),
      rows,
    ]),
  ]);
  const heads = h("div", { class: "gptlib-heads gptlib-stream-heads", role: "group", "aria-label": "heads: show one's attention row" });
  const rowCaptionId = uniqueId("stream-row-caption");
  const row = sharpCanvas(ROW_WIDTH, ROW_HEIGHT, "the chosen head's attention row");
  row.canvas.classList.add("gptlib-stream-row");
  row.canvas.setAttribute("aria-describedby", rowCaptionId);
  const rowCaption = h("div", { id: rowCaptionId, class: "gptlib-readout" });
  root.append(
    h("div", { class: "gptlib-text-row" }, [h("label", { for: textId, text: "text" }), text]),
    h("div", { class: "gptlib-columns" }, [
      h("div", { class: "gptlib-control gptlib-stream-position" }, [h("label", { for: positionId, text: "position t" }), position, positionShown]),
      mode,
    ]),
    status,
    stage, caption, readout, table, heads, row.canvas, rowCaption,
  );

  let data = null; // {n, T, L, H, values, A, labels, writes, descriptions, rows}
  let stale = false;
  let layout = []; // per write: its bar's x (CSS px)

  function receive() {
    const [n, T, L, H] = model.get("shape");
    if (!T || typing.state.ready) return;  // the page runs the model: the kernel's numbers are the same
    const descriptions = model.get("descriptions"), rows_ = model.get("rows"), values = array(model.get("values"), Float32Array);
    use({
      n, T, L, H, split: (m_, t_) => values.subarray((m_ * T + t_) * (n + 2), (m_ * T + t_ + 1) * (n + 2)),
      A: array(model.get("A"), Uint8Array), labels: model.get("labels"),
      writes: model.get("writes"), description: (m_, t_) => descriptions[m_][t_], row: (l, hh, t_) => rows_[(l * H + hh) * T + t_],
    });
  }

  // A run of the model in the page, for the text `typed` and the character `chosen`: the same numbers
  // and words as the kernel's (gptlib.viz.stream.StreamExplorer.rerun).
  let lastRun = null;
  function ran(run, typed, chosen = character.value) {
    const vocabulary = [...typing.state.weights.vocabulary];
    if ([...chosen].length !== 1 || !vocabulary.includes(chosen)) {
      refused(`the character must be one character of the ${vocabulary.length}-character vocabulary, got ${pythonRepr(chosen.slice(0, 12))}`);
      return;
    }
    lastRun = [run, typed];
    const { gpt, weights } = typing.state, { L, H, V } = weights.config;
    const T = run.T, labels = tokenLabels(typed), writes = gpt.writeLabels(weights.config), n = writes.length;
    const token = vocabulary.indexOf(chosen), tokens = [...typed].map((ch) => vocabulary.indexOf(ch));
    const predicted = Array.from({ length: T }, (_, t_) => {
      let best = 0;
      for (let k = 1; k < V; k++) if (run.logits[t_ * V + k] > run.logits[t_ * V + best]) best = k;
      return best;
    });
    const trueNext = tokens.slice(1);
    // each mode's and position's numbers and words, computed when first drawn (a keystroke draws one)
    const splits = new Map(), words = new Map();
    function split(m_, t_) {
      const at = m_ * T + t_;
      if (!splits.has(at)) {
        const row = new Float32Array(n + 2).fill(NaN), mode_ = MODES[m_];
        if (mode_ === "difference" && t_ === T - 1) {
          words.set(at, `position ${t_} is the text's last: no true next character to subtract`);
        } else {
          const k = mode_ === "character" ? token : predicted[t_];
          const parts = gpt.directContributions(weights, run, t_, k, mode_ === "difference" ? trueNext[t_] : null);
          row.set([...parts.values, parts.rest, parts.logit]);  // n writes, LN_f's part, the logit
          words.set(at, describeAttribution(writes, row, row[n], row[n + 1], title(vocabulary, labels, mode_, t_, predicted, trueNext, token),
            mode_ === "difference" ? "logit difference" : "logit"));
        }
        splits.set(at, row);
      }
      return splits.get(at);
    }
    const A = new Uint8Array(L * H * T * T);
    for (let l = 0; l < L; l++) {
      for (let i = 0; i < H; i++) {
        const pattern = run.attention[l][i];
        for (let j = 0; j < T * T; j++) A[(l * H + i) * T * T + j] = Math.round(pattern[j] * 255);
      }
    }
    stale = false;
    use({
      n, T, L, H, split, A, labels, writes, description: (m_, t_) => { split(m_, t_); return words.get(m_ * T + t_); },
      row: (l, hh, t_) => rowWords(labels, l, hh, t_, Array.from(run.attention[l][hh].subarray(t_ * T, t_ * T + t_ + 1))),
    });
  }
  function refused(reason) {
    stale = true;
    say(status, cannotDraw(reason, data !== null), true);
    redraw();
  }

  function use(numbers) {
    const sameWrites = data && data.writes.join() === numbers.writes.join();
    data = numbers;
    root.gptlibData = data;  // the numbers drawn, for the browser tests
    position.max = String(data.T - 1);
    position.value = String(Math.min(model.get("position"), data.T - 1));
    if (!sameWrites) build();
    redraw();
  }

  // the bars' canvas and the head buttons, which depend on the writes alone (kept from text to text)
  function build() {
    layout = [];
    let x = LEFT, group = -1;
    for (const label of data.writes) {
      if (layerOf(label) !== group) { x += GAP; group = layerOf(label); }
      layout.push(x);
      x += BAR;
    }
    const fresh = sharpCanvas(x + GAP, CHART_HEIGHT, "each write's direct contribution, a bar per write");
    bars.canvas = fresh.canvas;
    bars.context = fresh.context;
    fresh.canvas.classList.add("gptlib-stream-bars");
    fresh.canvas.setAttribute("aria-describedby", captionId);
    stage.replaceChildren(fresh.canvas, tip.element);
    fresh.canvas.addEventListener("mousemove", hover);
    fresh.canvas.addEventListener("mouseleave", () => tip.hide());
    fresh.canvas.addEventListener("click", (event) => {
      const i = barAt(event.offsetX), head = i === null ? null : headOf(data.writes[i]);
      if (head) choose(...head);
    });
    heads.replaceChildren(...data.writes.filter(headOf).map((label) => {
      const button = h("button", { type: "button", class: "gptlib-head-button", "aria-pressed": "false", text: label });
      button.addEventListener("click", () => choose(...headOf(label)));
      button.addEventListener("focus", () => say(readout, numbers(data.writes.indexOf(label))));
      return button;
    }));
  }

  const m = () => MODES.indexOf(MODES.find((name) => radios[name].checked) ?? model.get("mode"));
  const t = () => Number(position.value);
  const value = (mode_, t_, i) => data.split(mode_, t_)[i];
  const weight = (l, hh, t_, s) => data.A[((l * data.H + hh) * data.T + t_) * data.T + s] / 255; // sent as round(255 A^h)
  const quoted = (t_) => `'${data.labels[t_]}'`;
  function barAt(x) {
    const i = layout.findIndex((left) => x >= left && x < left + BAR);
    return i < 0 ? null : i;
  }
  function numbers(i) {
    const v = value(m(), t(), i);
    if (Number.isNaN(v)) return `${data.writes[i]}: no token at this position`;
    const logit = value(m(), t(), data.n + 1);
    return `${data.writes[i]}: direct contribution ${v >= 0 ? "+" : ""}${v.toFixed(3)} of the logit ${logit.toFixed(3)}`;
  }
  function hover(event) {
    if (!data) return;
    const i = barAt(event.offsetX);
    if (i === null) return tip.hide();
    tip.show(event.offsetX, event.offsetY, numbers(i));
  }

  function draw() {
    if (!data) return;
    const mode_ = m(), t_ = t(), [l, hh] = [model.get("layer"), model.get("head")];
    positionShown.textContent = `${t_} ${quoted(t_)}`;
    position.setAttribute("aria-valuetext", `position ${t_} of 0 to ${data.T - 1}, after ${quoted(t_)}`);
    for (const name of MODES) radios[name].checked = name === MODES[mode_];
    const c = bars.context, width = layout.length ? layout[layout.length - 1] + BAR + GAP : 0;
    c.fillStyle = "#ffffff";
    c.fillRect(0, 0, width, CHART_HEIGHT);
    const values = Array.from({ length: data.n }, (_, i) => value(mode_, t_, i));
    const drawable = !values.some(Number.isNaN);
    const largest = drawable ? Math.max(1e-6, ...values.map(Math.abs)) : 1;
    const zero = (PLOT.top + PLOT.bottom) / 2, scale = (PLOT.bottom - PLOT.top) / 2 / largest;
    c.strokeStyle = "#1a1a1a";
    c.lineWidth = 1;
    c.beginPath();
    c.moveTo(LEFT, zero);
    c.lineTo(width, zero);
    c.stroke();
    c.fillStyle = "#1a1a1a";
    c.font = "10px sans-serif";
    c.textAlign = "right";
    c.textBaseline = "middle";
    c.fillText(`+${largest.toFixed(2)}`, LEFT - 2, PLOT.top);
    c.fillText("0", LEFT - 2, zero);
    c.fillText(`-${largest.toFixed(2)}`, LEFT - 2, PLOT.bottom);
    c.textAlign = "center";
    let group = null;
    data.writes.forEach((label, i) => {
      const x = layout[i], v = values[i], head = headOf(label);
      if (drawable) {
        const chosen = head && head[0] === l && head[1] === hh;
        c.fillStyle = v >= 0 ? "#1565c0" : "#c62828";
        c.fillRect(x + 2, Math.min(zero, zero - v * scale), BAR - 4, Math.abs(v * scale));
        if (chosen) {
          c.strokeStyle = "#d9730d";
          c.lineWidth = 2;
          c.strokeRect(x + 1, PLOT.top - 4, BAR - 2, PLOT.bottom - PLOT.top + 8);
        }
      }
      c.fillStyle = "#1a1a1a";
      c.fillText(shortName(label), x + BAR / 2, PLOT.bottom + 12);
      if (layerOf(label) !== group) {
        group = layerOf(label);
        c.textAlign = "left";
        c.fillText(group < 0 ? "embed" : `layer ${group}`, x, PLOT.bottom + 30);
        c.textAlign = "center";
      }
    });
    c.textAlign = "left";
    c.fillText("heads 0..H-1, b = b_O, M = MLP; blue adds to the logit, red takes away", LEFT, PLOT.bottom + 48);
    bars.canvas.classList.toggle("gptlib-stale", stale);
    caption.textContent = data.description(mode_, t_);
    const named = [...data.writes, "LN_f's bias β W_U", "the logit (their sum)"];
    rows.replaceChildren(...named.map((name, i) => {
      const v = value(mode_, t_, i);
      return h("tr", {}, [h("td", { text: name, style: CELL }), h("td", { text: Number.isNaN(v) ? "–" : v.toFixed(3), style: `${CELL}; text-align: right` })]);
    }));

    for (const button of heads.children) {
      const [bl, bh] = headOf(button.textContent);
      button.setAttribute("aria-pressed", String(bl === l && bh === hh));
    }
    // the chosen head's attention row at query t: keys 0..t, weights in [0, 1]
    const r = row.context, cell = Math.min(20, (ROW_WIDTH - LEFT) / data.T);
    probabilityAxis(r, ROW_WIDTH, ROW_HEIGHT, LEFT - 4, 10, 110);
    r.textAlign = "center";
    r.font = `${Math.min(12, Math.max(7, cell - 1))}px monospace`;
    for (let s = 0; s < data.T; s++) {
      const x = LEFT + s * cell, w = s <= t_ ? weight(l, hh, t_, s) : 0;
      r.fillStyle = s === t_ ? "#d9730d" : "#4c72b0";
      r.fillRect(x + 1, 110 - 100 * w, cell - 2, 100 * w);
      r.fillStyle = s <= t_ ? "#1a1a1a" : "#767676";
      r.fillText(data.labels[s], x + cell / 2, 122);
    }
    r.textAlign = "left";
    r.font = "10px sans-serif";
    r.fillStyle = "#1a1a1a";
    r.fillText(`L${l}H${hh}: query ${t_} ${quoted(t_)} (orange) over keys 0..${t_}`, LEFT, 140);
    row.canvas.classList.toggle("gptlib-stale", stale);
    rowCaption.textContent = data.row(l, hh, t_);

    if (!drawable) say(status, data.description(mode_, t_), true);
    else if (!stale) say(status, `${data.T} characters, position ${t_}, ${MODES[mode_]}`);
  }
  const redraw = frameScheduler(root, draw);

  function choose(l, hh) {
    redraw();
    commit(model, { layer: l, head: hh });
  }
  position.addEventListener("input", () => { redraw(); commit(model, { position: t() }); });
  for (const name of MODES) radios[name].addEventListener("change", () => { redraw(); commit(model, { mode: name }); });
  function typedCharacter() {
    if (typing.state.ready && lastRun) ran(...lastRun, character.value);
    if (character.value !== model.get("character") && model.get("live")) commit(model, { character: character.value });
  }
  character.addEventListener("change", typedCharacter);
  character.addEventListener("keydown", (event) => { if (event.key === "Enter") typedCharacter(); });
  const typing = typedText(model, text, { ran, refused, said: (sentence) => say(status, sentence, true) });

  // The kernel's answer: its status line when it could not draw; a new frame only when the picture
  // greys or clears (its answer to a move the page has drawn already draws nothing again).
  function fromKernel() {
    if (typing.state.ready) return;  // the page says what it runs
    const was = stale;
    stale = model.get("stale");
    if (stale) say(status, model.get("message"), true);
    if (stale !== was) redraw();
  }
  model.on("change:values", receive); // the kernel sets values, A, labels, ... in one message
  for (const key of ["stale", "message"]) model.on(`change:${key}`, fromKernel);
  for (const key of ["position", "mode", "layer", "head"]) {
    model.on(`change:${key}`, () => {
      position.value = String(model.get("position"));
      radios[model.get("mode")].checked = true;
      redraw();
    });
  }
  radios[model.get("mode")].checked = true;
  return start(model, [text, character], receive, fromKernel);
}

export default { render };
