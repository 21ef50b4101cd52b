// The parameter-count explorer (gptlib.viz.counting.ParameterCountExplorer), drawn in the page:
// every typed size evaluates Theorem 5.2 here, exactly (BigInt), per component of the lecture's
// table; the kernel then counts a meta-device model's parameters and its answer is shown as
// the measured count.

const SIZES = [["V", "V, vocabulary size"], ["T_max", "T_max, context length"], ["d", "d, model width"],
  ["H", "H, heads"], ["L", "L, blocks"]];
const MAX_L = 10000n; // as gptlib.viz.counting.MAX_L
const MAX_SIZE = 2n ** 63n - 1n; // as gptlib.viz.counting.MAX_SIZE: what torch's int64 shapes hold
const MAX_DIGITS = 400; // as gptlib.viz.counting.MAX_DIGITS
const COMPONENTS = ["token and positional embeddings", "attention in all blocks", "MLPs in all blocks",
  "block LayerNorms", "final LayerNorm and unembedding"];

// What was typed in a size box as a BigInt, or an Error in the words of gptlib.viz.counting.whole_number
// (the same steps: a zero is 0 whatever its exponent; more than 400 digits is refused with the bound atMost).
export function wholeNumber(name, text, atMost = MAX_SIZE) {
  const plain = text.trim().replaceAll(",", "").replaceAll("_", "");
  const match = /^([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/.exec(plain);
  if (!match || (match[2] + (match[3] ?? "")).length === 0) {
    const finite = /^[+-]?(inf|infinity|nan|snan)$/i.test(plain);
    throw new Error(`${name}: '${shown(text)}' is not a ${finite ? "finite " : ""}number`);
  }
  const [, sign, whole, fraction = "", exponentText = "0"] = match;
  let digits = (whole + fraction).replace(/^0+/, "");
  if (!digits) return 0n;
  const exponent = Number(exponentText) - fraction.length; // +-Infinity for thousands of exponent digits
  if (exponent < 0) {
    const kept = Math.max(digits.length + exponent, 0);
    if (/[1-9]/.test(digits.slice(kept))) throw new Error(`${name}: ${shown(text)} is not a whole number`);
    digits = digits.slice(0, kept) || "0";
  } else if (digits.length + exponent > MAX_DIGITS) {
    throw new Error(`${name} must be an integer in [1, ${atMost}], got ${shown(text)} (more than ${MAX_DIGITS} digits)`);
  } else {
    digits += "0".repeat(exponent);
  }
  return (sign === "-" ? -1n : 1n) * BigInt(digits);
}

// Theorem 5.2, component by component, as gptlib.counting.theorem_5_2 sums it.
export function theorem52({ V, T_max, d, L, d_ff, tie, attn_only }) {
  const rows = [
    (V + T_max) * d,
    L * (4n * d * d + d),
    attn_only ? 0n : L * (2n * d * d_ff + d_ff + d),
    L * (attn_only ? 2n : 4n) * d,
    2n * d + (tie ? 0n : d * V),
  ];
  return { rows, total: rows.reduce((a, b) => a + b, 0n) };
}

// The sizes a count is for, e.g. "V=65, T_max=64, d=128, H=4, L=4" (H too, which Theorem 5.2 does not read).
export function sizesText(sizes) {
  return SIZES.map(([name]) => `${name}=${grouped(sizes[name])}`).join(", ");
}

// One formatter for every number: toLocaleString would build a new Intl.NumberFormat per call.
const GROUPED = new Intl.NumberFormat("en-US");
const grouped = (n) => GROUPED.format(n);
const percent = (part, whole, digits) => `${((100 * Number((part * 1000000n) / whole)) / 1000000).toFixed(digits)}%`;

function render({ model, el }) {
  const root = h("div", { class: "gptlib-explorer gptlib-count" });
  keepKeys(root);
  el.append(root);
  const boxes = {};
  const sizes = h("div", { class: "gptlib-count-sizes" });
  for (const [name, label] of SIZES) {
    const id = uniqueId(`count-${name}`);
    const box = h("input", { type: "text", id, inputmode: "numeric", "aria-label": label, spellcheck: "false" });
    box.value = String(model.get("typed")[name] ?? "");
    box.addEventListener("change", () => update(true));
    box.addEventListener("keydown", (event) => { if (event.key === "Enter") update(true); });
    boxes[name] = box;
    sizes.append(h("span", { class: `gptlib-count-${name.replace("_", "")}` }, [h("label", { for: id, text: name }), box]));
  }
  const tieId = uniqueId("count-tie");
  const tie = h("input", { type: "checkbox", id: tieId });
  tie.checked = model.get("tie");
  tie.addEventListener("change", () => update(true));
  sizes.append(h("span", { class: "gptlib-count-tie" }, [tie, h("label", { for: tieId, text: " tie W_U = E^T" })]));

  const caption = h("caption", { text: "Theorem 5.2, evaluated in this page, per component of the lecture's table" });
  const body = h("tbody");
  const table = h("table", { class: "gptlib-count-table gptlib-count-output" }, [caption,
    h("thead", {}, [h("tr", {}, ["component", "parameters", "share", "share of all parameters"].map((text) => h("th", { scope: "col", text })))]),
    body]);
  const theorem = statusLine("gptlib-count-theorem", 2);
  const measured = statusLine("gptlib-count-message", 2);
  root.append(sizes, table, theorem, measured);

  // The input the kernel is asked about: the last one sent from these boxes (Enter sends at once, and the
  // change event it fires repeats it) or set by the kernel itself (type_in, or code).
  let handled = null;
  function current() {
    return { typed: Object.fromEntries(SIZES.map(([name]) => [name, boxes[name].value])), tie: tie.checked };
  }
  const same = (a, b) => a && b && a.tie === b.tie &&
    SIZES.every(([name]) => JSON.stringify(a.typed[name]) === JSON.stringify(b.typed[name]));

  function read({ typed, tie: tied }) {
    const n = {};
    for (const [name] of SIZES) {
      n[name] = wholeNumber(name, typed[name], name === "L" ? MAX_L : MAX_SIZE);
      if (n[name] > MAX_SIZE) throw new Error(`${name} must be an integer <= ${MAX_SIZE}, got ${shown(typed[name])}`);
      if (n[name] < 1n) throw new Error(`${name} must be an integer >= 1, got ${n[name]}`);
    }
    if (n.L > MAX_L) throw new Error(`L must be an integer <= ${MAX_L}, got ${shown(typed.L)}`);
    if (n.d % n.H !== 0n) throw new Error(`H must divide d (Section 0): d=${n.d} is not a multiple of H=${n.H}`);
    const fixed = model.get("d_ff");
    return { ...n, d_ff: fixed > 0 ? BigInt(fixed) : 4n * n.d, tie: tied, attn_only: model.get("attn_only") };
  }

  function draw(config) {
    const { rows, total } = theorem52(config);
    body.replaceChildren(...rows.map((count, i) => {
      const share = percent(count, total, 1);
      return h("tr", {}, [h("td", { text: COMPONENTS[i] }), h("td", { text: grouped(count) }), h("td", { text: share }),
        h("td", { class: "gptlib-bar-cell", "aria-hidden": "true" }, [h("span", { class: "gptlib-bar", style: `width:${share}` })])]);
    }), h("tr", {}, [h("th", { scope: "row", text: "total" }), h("td", { text: grouped(total) }), h("td", { text: "100%" }), h("td")]));
    const lead = 12n * config.L * config.d * config.d, small = 10n * config.L * config.d;
    say(theorem, `Theorem 5.2: ${grouped(total)} parameters at ${sizesText(config)} (H splits d into heads and moves ` +
      `no parameter); leading 12Ld^2 = ${grouped(lead)} (${percent(lead, total, 1)}), 10Ld = ${grouped(small)} (${percent(small, total, 2)})`);
    table.classList.remove("gptlib-stale");
  }

  function showMeasured() {
    if (!model.get("live")) {
      say(measured, "Measured count: needs a running kernel (it builds the model on the meta device).");
    } else if (!same(model.get("answered"), handled)) {
      say(measured, "Measuring: the kernel is building this model on the meta device…");
    } else {
      say(measured, `Kernel: ${model.get("message")}`, model.get("stale"));
    }
  }

  const redraw = frameScheduler(root, () => {});
  function update(send) {
    const now = current();
    if (send && same(now, handled)) return;
    handled = now;
    try {
      draw(read(now));
    } catch (error) {
      table.classList.add("gptlib-stale");
      say(theorem, `Cannot draw: ${error.message} (the table still shows the last valid input).`, true);
    }
    redraw();
    if (send) commit(model, { typed: now.typed, tie: now.tie });
    showMeasured();
  }
  function fromKernel() {
    const typed = model.get("typed");
    for (const [name] of SIZES) boxes[name].value = String(typed[name] ?? "");
    tie.checked = model.get("tie");
    update(false);
    handled = { typed, tie: model.get("tie") };
    showMeasured();
  }
  for (const key of ["typed", "tie"]) model.on(`change:${key}`, fromKernel);
  for (const key of ["answered", "message", "stale"]) model.on(`change:${key}`, showMeasured);
  update(false);
  return () => model.off();
}

export default { render };
