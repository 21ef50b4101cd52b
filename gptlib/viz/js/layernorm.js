// The LayerNorm sphere (gptlib.viz.layernorm.LayerNormSphere), drawn in the page: every move of a
// control recomputes LN(cu) here, with Definition 4.1's formula, and redraws in the same frame.
// The kernel, when there is one, receives the values and answers with its explanation.

const D = 3;
const SQRT3 = Math.sqrt(3);
const CONSTANT_TOLERANCE = 1e-12; // as gptlib.viz.layernorm: sigma below this times max|u| is rounding noise
const EPS_STEPS = [0.0, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0];
const VIEWS = { "oblique": [20, 30], "down the all-ones axis": [90, 30], "side-on to the plane": [0, 30] };
const PLANE = [[1 / Math.SQRT2, -1 / Math.SQRT2, 0], [1 / Math.sqrt(6), 1 / Math.sqrt(6), -2 / Math.sqrt(6)]];
const ONES = [1, 1, 1];
const COLOURS = { u: "#000000", projection: "#c25400", normalized: "#1a7f1a", image: "#7b3fa0", circle: "#1f63b4", axis: "#6b6b6b" };

// Why eps cannot be drawn, or null for one of the slider's steps: gptlib.viz.layernorm.eps_refusal's words.
export function epsRefusal(eps) {
  if (EPS_STEPS.includes(eps)) return null;
  return `eps must be one of the slider's steps (${EPS_STEPS.map(formatG).join(", ")}), got ${formatG(eps)}`;
}

const add = (a, b) => a.map((x, i) => x + b[i]);
const times = (s, a) => a.map((x) => s * x);
const dot = (a, b) => a.reduce((sum, x, i) => sum + x * b[i], 0);
const norm = (a) => Math.sqrt(dot(a, a));

// LN(u) with gamma = 1, beta = 0: (u - mean(u) 1) / sqrt(sigma(u)^2 + eps), computed on u / s and
// eps / s^2 for a power of two s near max|u_i| (gptlib.analysis.layernorm does the same), so no square
// overflows or underflows. A zero-variance u maps to 0, never to NaN.
export function layerNorm(u, eps) {
  const largest = Math.max(...u.map(Math.abs), Math.sqrt(eps), 2.2250738585072014e-308);
  const s = 2 ** Math.floor(Math.log2(largest));
  const v = u.map((x) => x / s);
  const mean = v.reduce((a, b) => a + b, 0) / v.length;
  const centred = v.map((x) => x - mean);
  const denominator = centred.reduce((a, x) => a + x * x, 0) / v.length + eps / s / s;
  return denominator > 0 ? centred.map((x) => x / Math.sqrt(denominator)) : centred.map(() => 0);
}

// Everything the picture shows, as gptlib.viz.layernorm.sphere_scene computes it.
export function scene({ u0, u1, u2, scale, eps, gamma, beta }) {
  const cu = [u0, u1, u2].map((x) => scale * x);
  const largest = Math.max(...cu.map(Math.abs));
  const mean = cu.reduce((a, b) => a + b, 0) / D;
  let projection = cu.map((x) => x - mean);
  const sigma = norm(projection) / Math.sqrt(D);
  const degenerate = sigma <= CONSTANT_TOLERANCE * largest;
  if (degenerate) projection = [0, 0, 0];
  const normalized = degenerate ? [0, 0, 0] : layerNorm(cu, eps);
  const image = add(times(gamma, normalized), times(beta, ONES));
  return { u: cu, projection, normalized, image, sigma: degenerate ? 0 : sigma, degenerate, gamma, beta };
}

function viewBasis(tilt, turn) {
  const t = (tilt * Math.PI) / 180, r = (turn * Math.PI) / 180;
  const across = add(times(Math.cos(r), PLANE[0]), times(Math.sin(r), PLANE[1]));
  const right = add(times(-Math.sin(r), PLANE[0]), times(Math.cos(r), PLANE[1]));
  const up = add(times(-Math.sin(t), across), times(Math.cos(t) / SQRT3, ONES));
  return [right, up];
}

const fixed = (a) => `(${a.map((x) => x.toFixed(3)).join(", ")})`;

function describe(s) {
  const length = norm(s.normalized);
  let text = `cu = ${fixed(s.u)}; its projection P(cu) = ${fixed(s.projection)}; LN(cu) = ${fixed(s.normalized)}, ` +
    `length ${length.toFixed(4)} = ${(length / SQRT3).toFixed(4)} times the circle's radius sqrt(3)`;
  if (s.gamma !== 1 || s.beta !== 0) text += `; gamma LN(cu) + beta 1 = ${fixed(s.image)}`;
  return text + ".";
}

const SIZE = 420;

function render({ model, el }) {
  const root = h("div", { class: "gptlib-explorer gptlib-sphere" });
  keepKeys(root);
  el.append(root);
  const status = statusLine("gptlib-sphere-message", 3);
  const readout = h("p", { class: "gptlib-readout gptlib-sphere-readout" });
  const { canvas, context } = sharpCanvas(SIZE, SIZE, "");
  canvas.classList.add("gptlib-sphere-output");
  const stage = h("div", { class: "gptlib-stage" }, [canvas]);
  const tip = hoverReadout(stage);
  const values = {};
  let good = null; // the last drawable values
  let stale = false;

  function refuse(reason) {
    stale = true;
    canvas.classList.add("gptlib-stale");
    say(status, `Cannot draw: ${reason} (the picture still shows the last valid input).`, true);
  }

  const controls = {};
  const sliders = [
    ["u0", "u_1", -3, 3, 0.1], ["u1", "u_2", -3, 3, 0.1], ["u2", "u_3", -3, 3, 0.1], ["scale", "scale c", -3, 3, 0.05],
    ["gamma", "gamma", -2, 2, 0.1], ["beta", "beta", -2, 2, 0.1], ["tilt", "tilt", -90, 90, 5], ["turn", "turn", -180, 180, 5],
  ];
  for (const [key, label, min, max, step] of sliders) {
    values[key] = model.get(key);
    controls[key] = numberControl({
      name: label, label, min, max, step, value: values[key], css: `gptlib-sphere-${key}`, refuse,
      onInput: (v) => move({ [key]: v }),
    });
  }
  // epsilon: a slider over EPS_STEPS, read out as the value itself
  values.eps = model.get("eps");
  const epsId = uniqueId("eps");
  const epsSlider = h("input", { type: "range", id: epsId, min: 0, max: EPS_STEPS.length - 1, step: 1, "aria-label": "epsilon", class: "gptlib-range" });
  const epsShown = h("output", { for: epsId, class: "gptlib-number-shown" });
  function setEps(v) {
    epsSlider.value = String(Math.max(0, EPS_STEPS.indexOf(v)));
    epsSlider.setAttribute("aria-valuetext", String(v));
    epsShown.textContent = String(v);
  }
  setEps(values.eps);
  epsSlider.addEventListener("input", () => {
    const eps = EPS_STEPS[Number(epsSlider.value)];
    setEps(eps); // its read-out follows at once, not when the kernel answers
    move({ eps });
  });
  const epsRow = h("div", { class: "gptlib-control gptlib-sphere-eps" }, [h("label", { for: epsId, text: "epsilon" }), epsSlider, epsShown]);

  const presets = Object.entries(VIEWS).map(([name, [tilt, turn]]) => {
    const button = h("button", { type: "button", class: "gptlib-preset", "aria-pressed": "false", text: name });
    button.addEventListener("click", () => {
      controls.tilt.set(tilt);
      controls.turn.set(turn);
      move({ tilt, turn });
    });
    return [button, tilt, turn];
  });
  const views = h("div", { class: "gptlib-sphere-view", role: "group", "aria-label": "view presets" },
    [h("span", { text: "view: " }), ...presets.map(([button]) => button)]);

  const legend = h("ul", { class: "gptlib-legend" }, [
    ["u", "cu, the input scaled by c"], ["projection", "P(cu), its projection onto the plane 1⊥"],
    ["normalized", "LN(cu) with gamma = 1, beta = 0"], ["circle", "circle of radius sqrt(3) in 1⊥"],
    ["axis", "all-ones direction 1 (dashed)"], ["image", "gamma LN(cu) + beta 1 (when gamma ≠ 1 or beta ≠ 0)"],
  ].map(([key, text]) => h("li", {}, [h("span", { class: "gptlib-swatch", style: `background:${COLOURS[key]}` }), text])));

  const column = h("div", { class: "gptlib-controls" }, [
    ...["u0", "u1", "u2", "scale"].map((k) => controls[k].row), epsRow,
    ...["gamma", "beta", "tilt", "turn"].map((k) => controls[k].row), views, legend,
  ]);
  root.append(h("div", { class: "gptlib-columns" }, [column, h("div", {}, [stage, readout])]), status);

  let screenPoints = [];
  function draw() {
    if (!good) return; // nothing drawable has arrived yet
    const s = scene(good);
    const [right, up] = viewBasis(good.tilt, good.turn);
    const vectors = [s.u, s.projection, s.normalized, s.image];
    const extent = Math.max(2.5, 1.15 * Math.max(...vectors.map(norm)));
    const unit = SIZE / 2 / extent;
    const at = (p) => [SIZE / 2 + unit * dot(p, right), SIZE / 2 - unit * dot(p, up)];
    const c = context;
    c.clearRect(0, 0, SIZE, SIZE);
    c.fillStyle = "#ffffff";
    c.fillRect(0, 0, SIZE, SIZE);
    const ring = (radius, shift, gamma = 1) => Array.from({ length: 121 }, (_, i) => {
      const a = (2 * Math.PI * i) / 120;
      return at(add(times(gamma * radius, add(times(Math.cos(a), PLANE[0]), times(Math.sin(a), PLANE[1]))), times(shift, ONES)));
    });
    const path = (points, colour, width, dash = [], fill = null) => {
      c.beginPath();
      points.forEach(([x, y], i) => (i ? c.lineTo(x, y) : c.moveTo(x, y)));
      if (fill) { c.fillStyle = fill; c.fill(); }
      if (width) { c.setLineDash(dash); c.strokeStyle = colour; c.lineWidth = width; c.stroke(); c.setLineDash([]); }
    };
    const arrow = (tip, colour, width) => {
      const [x0, y0] = at([0, 0, 0]), [x1, y1] = at(tip);
      const length = Math.hypot(x1 - x0, y1 - y0);
      path([[x0, y0], [x1, y1]], colour, width);
      if (length < 1) return;
      const ux = (x1 - x0) / length, uy = (y1 - y0) / length, head = Math.min(10, length / 2);
      path([[x1, y1], [x1 - head * ux - head * 0.45 * uy, y1 - head * uy + head * 0.45 * ux],
        [x1 - head * ux + head * 0.45 * uy, y1 - head * uy - head * 0.45 * ux], [x1, y1]], colour, 0, [], colour);
    };
    const dotAt = (p, colour, radius) => {
      const [x, y] = at(p);
      c.beginPath(); c.arc(x, y, radius, 0, 2 * Math.PI); c.fillStyle = colour; c.fill();
    };
    path(ring(0.95 * extent, 0), null, 0, [], "rgba(31, 99, 180, 0.08)");
    path(ring(SQRT3, 0), COLOURS.circle, 1.8);
    path([at(times(-extent / SQRT3, ONES)), at(times(extent / SQRT3, ONES))], COLOURS.axis, 1, [6, 4]);
    c.font = "13px sans-serif";
    c.textAlign = "center";
    c.textBaseline = "middle";
    for (let i = 0; i < D; i++) {
      const tipPoint = [0, 0, 0];
      tipPoint[i] = 0.6 * extent;
      arrow(tipPoint, COLOURS.axis, 0.8);
      const [x, y] = at(times(1.1, tipPoint));
      c.fillStyle = COLOURS.axis;
      c.fillText(`e${i + 1}`, x, y);
    }
    path([at(s.u), at(s.projection)], COLOURS.projection, 1.5, [2, 3]);
    path([at(s.projection), at(s.normalized)], COLOURS.normalized, 1, [6, 4]);
    arrow(s.u, COLOURS.u, 2);
    arrow(s.projection, COLOURS.projection, 2.5);
    dotAt(s.normalized, COLOURS.normalized, 5);
    const affine = s.gamma !== 1 || s.beta !== 0;
    if (affine) {
      path(ring(SQRT3, s.beta, s.gamma), COLOURS.image, 1.2, [6, 4]);
      dotAt(s.image, COLOURS.image, 5);
    }
    dotAt([0, 0, 0], "#000000", 3);
    c.fillStyle = "#444444";
    c.textAlign = "left";
    c.fillText(`view: tilt ${good.tilt}°, turn ${good.turn}°`, 6, 12);
    screenPoints = [["cu", s.u], ["P(cu)", s.projection], ["LN(cu)", s.normalized], ...(affine ? [["gamma LN(cu) + beta 1", s.image]] : [])]
      .map(([name, p]) => [name, p, ...at(p)]);
    canvas.dataset.points = JSON.stringify(screenPoints.map(([name, , x, y]) => [name, x, y])); // for tests: where to hover
    const text = describe(s);
    readout.textContent = text;
    canvas.setAttribute("aria-label", `LayerNorm sphere: the circle of radius sqrt(3) in the plane 1⊥; ${text}`);
    canvas.classList.toggle("gptlib-stale", stale);
    for (const [button, tilt, turn] of presets) button.setAttribute("aria-pressed", String(tilt === good.tilt && turn === good.turn));
  }
  const redraw = frameScheduler(root, draw);

  // Why values set by the kernel cannot be drawn, or null (the kernel refuses them in the same words).
  function refusal(v) {
    const broken = Object.entries(v).find(([, x]) => !Number.isFinite(x));
    return broken ? `${broken[0]} must be a finite number, got ${broken[1]}` : epsRefusal(v.eps);
  }

  // A move made in the page: draw now, tell the kernel after.
  function move(changes) {
    Object.assign(values, changes);
    stale = false;
    good = { ...values };
    // the kernel's explanation of the last values it saw, until it explains these (none in a static page)
    say(status, model.get("live") ? model.get("message") : "The kernel's explanation needs a running notebook; the numbers above are computed in this page.");
    redraw();
    echoing = true; // the model's own change events for these values are not the kernel's
    commit(model, changes);
    echoing = false;
  }

  // Values or a message set by the kernel (from code, or its answer to a move).
  let echoing = false;
  function fromKernel() {
    if (echoing) return;
    for (const key of [...Object.keys(controls), "eps"]) values[key] = model.get(key);
    for (const [key, control] of Object.entries(controls)) if (control.get() !== values[key]) control.set(values[key]);
    setEps(values.eps);
    const reason = refusal(values);
    if (reason) refuse(reason);
    else {
      good = { ...values };
      stale = model.get("stale");
      say(status, model.get("message"), stale);
    }
    redraw();
  }
  for (const key of [...Object.keys(controls), "eps", "message", "stale"]) model.on(`change:${key}`, fromKernel);

  canvas.addEventListener("mousemove", (event) => {
    const box = canvas.getBoundingClientRect();
    const x = event.clientX - box.left, y = event.clientY - box.top;
    let best = null;
    for (const [name, p, px, py] of screenPoints) {
      const distance = Math.hypot(px - x, py - y);
      if (distance < 14 && (!best || distance < best[0])) best = [distance, name, p];
    }
    if (best) tip.show(x, y, `${best[1]} = ${fixed(best[2])}`);
    else tip.hide();
  });
  canvas.addEventListener("mouseleave", () => tip.hide());

  fromKernel();
  return () => model.off();
}

export default { render };
