// The model in the page, for the explorers that run it (attention, stream, next character): gptlib/viz/
// explorer.py puts this file after common.js and before the explorer's own module, with GPT_SOURCE (the
// text of js/gpt.js) and WEIGHTS_DIR defined in front. Typed text is run here, by gpt.js, with no kernel:
// in the book (the weights file the book ships beside its pages) as in a live front end (the weights the
// kernel sent once as a binary buffer, a PageWeights widget every explorer of that model shares).
// Each page loads gpt.js once and each model's weights once, however many explorers it holds.

// gpt.js, an ES module, imported once per page from its text (a blob URL): the text this module holds (a
// live explorer's), or, in a static copy, globalThis.gptlibGptSource: set in a single-file page
// (gptlib.viz.page_export), else by the classic script the book ships beside the weights
// (WEIGHTS_DIR/GPT_SCRIPT, which a page opened from the file system may load too).
function classicScript(src) {
  return new Promise((resolve, reject) => {
    const script = document.createElement("script");
    script.src = src;
    script.onload = resolve;
    script.onerror = () => reject(new Error(`the file ${src} is missing`));
    document.head.append(script);
  });
}
function gptModule() {
  globalThis.gptlibGpt ??= (GPT_SOURCE !== null ? Promise.resolve(GPT_SOURCE)
    : typeof globalThis.gptlibGptSource === "string" ? Promise.resolve(globalThis.gptlibGptSource)
    : classicScript(`${WEIGHTS_DIR}/${GPT_SCRIPT}`).then(() => globalThis.gptlibGptSource))
    .then((source) => import(URL.createObjectURL(new Blob([source], { type: "text/javascript" }))));
  return globalThis.gptlibGpt;
}

// Weights as base64 text (globalThis.gptlibWeights[KEY]), read from `where` -> their bytes. A loop:
// Uint8Array.from's callback per byte made a task of 340-425 ms of 3.3 MB.
function base64Bytes(base64, where) {
  let text;
  try {
    text = atob(base64);
  } catch {
    throw new Error(`the weights in ${where} are corrupted: they are not base64`);
  }
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i += 1) bytes[i] = text.charCodeAt(i);
  return bytes.buffer;
}

// A shipped checkpoint's weights: in a single-file page, globalThis.gptlibWeights[KEY] (base64) set in its
// head (gptlib.viz.page_export); in the book (tools/build_book.py), WEIGHTS_DIR/KEY.gptw, fetched relative to
// the page, or, opened from the file system, where fetch cannot read a file, the same bytes from
// WEIGHTS_DIR/KEY.js, a classic script (which a file:// page may load) setting globalThis.gptlibWeights[KEY].
function shippedBytes(key) {
  if (typeof globalThis.gptlibWeights?.[key] === "string") return Promise.resolve().then(() => base64Bytes(globalThis.gptlibWeights[key], "this page"));
  if (location.protocol === "http:" || location.protocol === "https:") {
    const file = `${WEIGHTS_DIR}/${key}.gptw`;
    return fetch(file).catch(() => { throw new Error(`the weights file ${file} could not be fetched`); }).then((response) => {
      if (!response.ok) throw new Error(`the weights file ${file} is missing (HTTP ${response.status})`);
      return response.arrayBuffer();
    });
  }
  const file = `${WEIGHTS_DIR}/${key}.js`;
  return classicScript(file).then(() => {
    const base64 = globalThis.gptlibWeights?.[key];
    if (typeof base64 !== "string") throw new Error(`the weights file ${file} holds no weights ${key}`);
    return base64Bytes(base64, file);
  }, () => { throw new Error(`the weights file ${file} is missing`); });
}

// The weights a live explorer's kernel sent: its page_weights trait names a PageWeights widget
// ("IPY_MODEL_<id>") whose `data` holds the bytes and `key` their name.
async function sentBytes(model) {
  const shared = await model.widget_manager.get_model(model.get("page_weights").slice("IPY_MODEL_".length));
  const view = shared.get("data");
  return { key: shared.get("key"), bytes: view.buffer.slice(view.byteOffset, view.byteOffset + view.byteLength) };
}

// The explorer's model in the page, read once per page and key: a promise of gpt.js's model, or null where
// this explorer has none (a kernel's model that gpt.js does not run, a saved copy whose weights the page
// has no file for). A weights file that cannot be read rejects with one sentence (gpt.js's WeightsError).
async function pageModel(model) {
  const sent = model.get("page_weights"), saved = model.get("weights");
  if (!sent && !saved) return null;
  const pages = (globalThis.gptlibPageModels ??= new Map());
  const key = sent ? `sent:${sent}` : `shipped:${saved.key}`;
  if (!pages.has(key)) {  // gpt.js and the weights are fetched at once, not one after the other
    const bytes = sent ? sentBytes(model).then(({ bytes }) => bytes) : shippedBytes(saved.key);
    pages.set(key, Promise.all([gptModule(), bytes]).then(([gpt, read]) => gpt.readWeights(read, saved?.config ?? null)));
  }
  const weights = await pages.get(key);
  return { gpt: await gptModule(), weights };
}

// A model explorer's root in `el` (gptlib-STEM-explorer) and its text box (gptlib-STEM-text, id textId), holding
// the explorer's text.
function modelExplorer(model, el, stem) {
  const root = h("div", { class: `gptlib-explorer gptlib-${stem}-explorer` });
  keepKeys(root);
  el.append(root);
  const textId = uniqueId(`${stem}-text`);
  const text = h("textarea", { id: textId, class: `gptlib-text gptlib-${stem}-text`, rows: 2, spellcheck: "false" });
  text.value = model.get("text");
  return { root, text, textId };
}

// A 2-D context cleared to white over width x height, with a probability axis's "1" at y = top and "0" at
// y = bottom, right-aligned at x (the next-character bars, the stream explorer's attention row).
function probabilityAxis(c, width, height, x, top, bottom) {
  c.fillStyle = "#ffffff";
  c.fillRect(0, 0, width, height);
  c.fillStyle = "#1a1a1a";
  c.font = "10px sans-serif";
  c.textAlign = "right";
  c.textBaseline = "middle";
  c.fillText("1", x, top);
  c.fillText("0", x, bottom);
}

// What the kernel says when it refuses a text (gptlib.viz.explorer.Explorer.refuse).
function cannotDraw(reason, drawn) {
  return `Cannot draw: ${reason} (${drawn ? "the picture still shows the last valid input" : "nothing is drawn"}).`;
}

// Typed text run in the page. `explorer.ran(run, text)` draws a run of gpt.js; `explorer.refused(sentence)`
// keeps the last picture under a sentence (the kernel's words: gpt.js's TextError, T_max, empty text);
// `explorer.said(sentence)` shows why the page cannot run the model (a weights file it cannot read),
// the picture kept as it is. The explorer's root says how far the page's model is (data-page-model: loading,
// then ready, failed, or none where the page has no model for it), which the book waits for before it
// loads and typesets its mathematics (book/_static/mathjax_after_explorers.js).
// Until the model is ready, and where the page has none, typed text goes to the kernel (sendTyped); once
// it is ready every keystroke is run here, and still sent to the kernel (where there is one) so that the
// explorer's values in Python follow the page. Returns { ready: whether the page runs the model, run(text) }.
function typedText(model, box, explorer) {
  const state = { ready: false, session: null, gpt: null, weights: null };
  function run(text) {
    const { gpt, weights } = state;
    const T_max = weights.config.T_max;
    let tokens;
    try {
      if (!text) throw new gpt.TextError("type at least one character");
      if (text.length > T_max) throw new gpt.TextError(`the text has ${text.length} characters; this model reads at most T_max = ${T_max}`);
      tokens = gpt.encode(weights, text);
    } catch (error) {
      if (!(error instanceof gpt.TextError)) throw error;
      explorer.refused(error.message);
      return;
    }
    explorer.ran(state.session.run(tokens), text);
  }
  if (model.get("live")) sendTyped(model, box);
  box.addEventListener("input", () => { if (state.ready) run(box.value); });
  model.on("change:text", () => {  // set from code: the page runs it too
    if (state.ready && box.value !== model.get("text")) { box.value = model.get("text"); run(box.value); }
  });
  root(box).dataset.pageModel = "loading";
  pageModel(model).then((loaded) => {
    if (!loaded) {
      root(box).dataset.pageModel = "none";
      return;
    }
    Object.assign(state, loaded, { session: new loaded.gpt.Session(loaded.weights), ready: true });
    for (const saved of root(box).querySelectorAll("[readonly]")) {  // a saved copy's boxes take typing now
      saved.readOnly = false;
      saved.removeAttribute("aria-description");
    }
    root(box).dataset.pageModel = "ready";
    run(box.value);  // the page's own numbers from now on
  }, (error) => requestAnimationFrame(() => {  // after the first frame, whose status line would replace the sentence
    root(box).dataset.pageModel = "failed";
    explorer.said(error.message);
  }));
  return { state, run };
}

// One label per character, newline shown as '\\n' and space as '␣' (gptlib.viz.attention.token_labels).
function tokenLabels(text) {
  return [...text].map((ch) => (ch === "\n" ? "\\n" : ch === " " ? "␣" : ch));
}

function root(node) {
  return node.closest(".gptlib-explorer");
}

// The end of every model explorer's render: a saved copy takes typing only once the page runs the model
// (typedText); then the first picture from the values sent or saved, and the kernel's status line.
function start(model, boxes, receive, fromKernel) {
  if (!model.get("live") && root(boxes[0]).dataset.pageModel !== "ready") {
    for (const box of boxes) {
      box.readOnly = true;
      box.setAttribute("aria-description", "saved: changing it needs a running kernel, or this model's weights beside the page");
    }
  }
  receive();
  fromKernel();
  return () => model.off();
}
