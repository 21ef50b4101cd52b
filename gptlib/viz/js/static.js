// A saved explorer drawn in a page without a kernel (gptlib/viz/explorer.py): its module `source`
// rendered into `host` (in place of the kernel's PNG there, if any) with a model that keeps the
// saved `values` in the page, as a widget model does with no kernel to tell. Bytes are saved as
// {base64: "..."} and reach the module as a DataView, as anywidget gives them.
function savedBytes(base64) {
  const text = atob(base64), bytes = new Uint8Array(text.length);  // a loop: Uint8Array.from's callback per byte is slow
  for (let i = 0; i !== text.length; i += 1) bytes[i] = text.charCodeAt(i);  // "!==": this file is inlined in a script element, where no less-than sign may stand
  return new DataView(bytes.buffer);
}

async function showSaved(host, source, values) {
  for (const [name, value] of Object.entries(values)) {
    if (value && typeof value === "object" && "base64" in value) values[name] = savedBytes(value.base64);
  }
  const listeners = [];
  const model = {
    get: (name) => values[name],
    set: (name, value) => { values[name] = value; for (const [event, f] of listeners) if (event === `change:${name}`) f(); },
    save_changes: () => {},
    send: () => {},
    on: (event, f) => listeners.push([event, f]),
    off: () => { listeners.length = 0; },
  };
  const url = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
  const widget = (await import(url)).default;
  const el = document.createElement("div");
  const picture = host.querySelector("img");
  if (picture) picture.replaceWith(el);
  else host.append(el);
  widget.render({ model, el });
}
