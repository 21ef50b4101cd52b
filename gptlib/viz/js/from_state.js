// An explorer's second output (gptlib/viz/explorer.py): in a page that holds widget state (nbconvert's
// HTML of a notebook executed or saved with it, nbviewer), the page shows the explorer's first output
// as its widget view, which only a widget renderer fetched from a CDN can draw. Here, the explorer is
// drawn as a static copy from the state that page stores for it, until a renderer draws the view (then
// the copy goes). Anywhere else (a live front end, the book, a page with the static copy) it does nothing.
const VIEW = 'script[type="application/vnd.jupyter.widget-view+json"]';
const STATE = 'script[type="application/vnd.jupyter.widget-state+json"]';

function fromStoredState(here) {
  // The form the page chose for this explorer's first output: the nearest widget view or static copy before here.
  const before = [...document.querySelectorAll(`${VIEW}, .gptlib-static`)]
    .filter((node) => node.compareDocumentPosition(here) & Node.DOCUMENT_POSITION_FOLLOWING);
  const view = before.at(-1);
  if (!view || !view.matches(VIEW)) return;  // the static copy is shown, or a live front end draws the widget
  if (view.parentElement.querySelector(".gptlib-explorer")) return;  // a widget renderer drew the view already
  const id = JSON.parse(view.textContent).model_id;
  const stored = [...document.querySelectorAll(STATE)].map((tag) => JSON.parse(tag.textContent).state?.[id]).find(Boolean);
  if (!stored) return;  // no state stored for it: a live widget manager draws the view (Voila)
  const values = { ...stored.state, live: false };  // no kernel answers here
  for (const { path, data, encoding } of stored.buffers ?? []) {  // @jupyter-widgets/schema: base64 or hex
    const base64 = encoding === "hex" ? btoa(data.match(/[0-9a-f]{2}/gi).map((pair) => String.fromCharCode(parseInt(pair, 16))).join("")) : data;
    const parent = path.slice(0, -1).reduce((node, key) => node[key], values);
    parent[path.at(-1)] = savedBytes(base64);
  }
  const copy = document.createElement("div");
  copy.className = "gptlib-static";
  copy.append(Object.assign(document.createElement("style"), { textContent: values._css ?? "" }));
  here.append(copy);
  showSaved(copy, values._esm, values);
  new MutationObserver((records, observer) => {  // a widget renderer that did load draws the view beside its tag
    if (view.parentElement.querySelector(".gptlib-explorer")) {
      copy.remove();
      observer.disconnect();
    }
  }).observe(view.parentElement, { childList: true, subtree: true });
}

// Where this script sits (captured as it runs); the stored state comes at the end of the page.
const here = document.currentScript?.parentElement;
if (here && document.readyState === "loading") document.addEventListener("DOMContentLoaded", () => fromStoredState(here));
else if (here) fromStoredState(here);
