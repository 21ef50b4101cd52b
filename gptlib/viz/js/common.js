// What the four explorers' front ends share (gptlib/viz/explorer.py prepends this file to each
// explorer's module): building labelled controls, reading typed numbers, the status line,
// a sharp canvas, and a hover read-out. Nothing here is fetched from anywhere.

function h(tag, attrs = {}, children = []) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) node.append(child);
  return node;
}

let controlCount = 0;
function uniqueId(stem) {
  controlCount += 1;
  return `gptlib-${stem}-${controlCount}-${Math.random().toString(36).slice(2, 8)}`;
}

// A decimal number as typed ("1e3", "-0.35", " 2 "), or an Error in the words the count
// explorer's boxes use too (gptlib.viz.counting.whole_number): "u_1: 'abc' is not a number".
const NUMBER = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;
function shown(text) {
  const trimmed = text.trim();
  return trimmed.length > 24 ? `${trimmed.slice(0, 12)}…(${trimmed.length} characters)` : trimmed;
}
function typedNumber(name, text) {
  const trimmed = text.trim();
  if (!NUMBER.test(trimmed)) throw new Error(`${name}: '${shown(text)}' is not a number`);
  const value = Number(trimmed);
  if (!Number.isFinite(value)) throw new Error(`${name}: '${shown(text)}' is not a finite number`);
  return value;
}

// A number as Python's format(x, "g") writes it: 6 significant digits, an exponent (two digits
// at least) below 1e-4 and from 1e6, no trailing zeros ("0.001", "3", "1e-07", "1.5e+06").
function formatG(x) {
  if (!Number.isFinite(x)) return String(x).replace("Infinity", "inf").toLowerCase();
  if (x === 0) return Object.is(x, -0) ? "-0" : "0";
  const trim = (digits) => (digits.includes(".") ? digits.replace(/0+$/, "").replace(/\.$/, "") : digits);
  const [mantissa, power] = x.toExponential(5).split("e");
  const exponent = Number(power);
  if (exponent < -4 || exponent >= 6) {
    return `${trim(mantissa)}e${exponent < 0 ? "-" : "+"}${String(Math.abs(exponent)).padStart(2, "0")}`;
  }
  return trim(x.toFixed(5 - exponent));
}

// The shortest decimal that a step grid means: 1.2000000000000002 on a 0.1 grid reads "1.2".
function decimals(step) {
  const text = String(step);
  return text.includes(".") ? text.length - text.indexOf(".") - 1 : 0;
}
function readable(value, step) {
  return String(Number(value.toFixed(Math.max(decimals(step), 0) + 6)));
}

// A slider with a text box beside it, both named for assistive technology. The slider moves in
// steps; a typed number in range is used exactly (the slider shows the nearest step); anything
// else calls refuse(message) and leaves the value as it was.
function numberControl({ name, label, min, max, step, value, onInput, refuse, css }) {
  const id = uniqueId(css);
  const slider = h("input", {
    type: "range", id, min, max, step, "aria-label": label, class: "gptlib-range",
  });
  const box = h("input", {
    type: "text", inputmode: "decimal", "aria-label": `${label}, exact value`, class: "gptlib-number",
    size: 7,
  });
  const row = h("div", { class: `gptlib-control ${css}` }, [h("label", { for: id, text: label }), slider, box]);
  let current = value;
  function set(v, fromSlider = false) {
    current = v;
    if (!fromSlider) slider.value = String(v);
    const text = readable(v, step);
    slider.setAttribute("aria-valuetext", text);
    if (document.activeElement !== box || fromSlider) box.value = text;
  }
  slider.addEventListener("input", () => {
    const v = Number(readable(Number(slider.value), step));
    set(v, true);
    onInput(v);
  });
  function typed() {
    let v;
    try {
      v = typedNumber(name, box.value);
      if (v < min || v > max) throw new Error(`${name} must be a finite number in [${min.toFixed(1)}, ${max.toFixed(1)}], got ${v}`);
    } catch (error) {
      refuse(error.message);
      return;
    }
    set(v);
    box.value = box.value.trim();
    onInput(v);
  }
  box.addEventListener("change", typed);
  box.addEventListener("keydown", (event) => { if (event.key === "Enter") typed(); });
  set(value);
  return { row, slider, box, set, get: () => current };
}

// The status line: polite live region, a fixed number of lines so nothing below moves.
function statusLine(css, lines) {
  return h("div", {
    class: `gptlib-status ${css}`, role: "status", "aria-live": "polite", style: `min-height:${1.4 * lines}em`,
  });
}
function say(status, text, error = false) {
  status.textContent = text;
  status.classList.toggle("gptlib-error", error);
}

// A canvas drawn at the screen's pixel density, `width` x `height` CSS pixels, never stretched.
function sharpCanvas(width, height, label) {
  const canvas = h("canvas", { role: "img", "aria-label": label, class: "gptlib-canvas" });
  const ratio = window.devicePixelRatio || 1;
  canvas.width = Math.round(width * ratio);
  canvas.height = Math.round(height * ratio);
  canvas.style.width = `${width}px`;
  canvas.style.height = `${height}px`;
  const context = canvas.getContext("2d");
  context.scale(ratio, ratio);
  return { canvas, context };
}

// A read-out that follows the pointer inside `host` (position: relative).
function hoverReadout(host) {
  const tip = h("div", { class: "gptlib-tip", role: "tooltip" });
  tip.hidden = true;
  host.append(tip);
  return {
    element: tip,
    show(x, y, text) {
      tip.textContent = text;
      tip.hidden = false;
      tip.style.left = `${x + 14}px`;
      tip.style.top = `${y + 10}px`;
    },
    hide() { tip.hidden = true; },
  };
}

// The explorer's own picture is redrawn at most once per animation frame, however many
// events arrive; `frames` counts the drawings (read by the browser tests and the benchmark).
function frameScheduler(root, draw) {
  let pending = false;
  root.dataset.frames = "0";
  return () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      draw();
      root.dataset.frames = String(Number(root.dataset.frames) + 1);
    });
  };
}

// Send a change to the kernel when there is one (a static page's model keeps it locally).
function commit(model, changes) {
  for (const [key, value] of Object.entries(changes)) model.set(key, value);
  model.save_changes();
}

// Text the kernel must run (the model on a new text), sent at every keystroke with no pause to wait
// for, numbered (the model's `typed`), one request in flight: keystrokes made while the kernel runs
// one text are sent together, as the box then reads, the moment it answers (its `answered` equals
// the number sent). Every answer is for the newest text sent, so the picture follows the typing,
// none is dropped, and the last drawn is always the box's last text. An answer lost (an error in
// the kernel) blocks nothing: after LOST_MS the next keystroke is sent anyway.
const LOST_MS = 2000;
function sendTyped(model, box) {
  let waiting = false, more = false, sentAt = 0;
  function send() {
    waiting = true;
    more = false;
    sentAt = performance.now();
    commit(model, { text: box.value, typed: model.get("typed") + 1 });
  }
  box.addEventListener("input", () => {
    if (waiting && performance.now() - sentAt < LOST_MS) more = true;
    else send();
  });
  model.on("change:answered", () => {
    if (model.get("answered") !== model.get("typed")) return; // an answer to another view's text
    waiting = false;
    if (more) send();
  });
}

// Keys pressed in the explorer's own controls are theirs: JupyterLab's notebook shortcuts
// (arrows move between cells in command mode) listen on the document, after the event bubbles.
function keepKeys(root) {
  root.addEventListener("keydown", (event) => {
    if (event.target !== root && event.key !== "Escape") event.stopPropagation();
  });
}
