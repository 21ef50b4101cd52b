"""A page whose explorers run the model starts fetching its weights and gpt.js as its head is read.

An explorer's static copy asks for its model's weights (WEIGHTS_DIR/KEY.gptw, or KEY.js opened from the file
system) and for gpt.js's text (WEIGHTS_DIR/GPT_SCRIPT) only once its module runs, after the whole page is
parsed (gptlib/viz/js/inpage.js). This adds to the head of each page whose copies name shipped weights
(gptlib.viz.page_model.saved_weights_keys) a script that preloads those files, so that they are in hand by
then: about 100 ms sooner to a model ready for typed text on this 2-core machine
(`python -m benchmarks.book_load BUILD/book/html`).
"""

import json

from gptlib.viz.page_model import GPT_SCRIPT, WEIGHTS_DIR, saved_weights_keys

# Served, the page fetches KEY.gptw (a preload "as fetch" in fetch()'s own mode); from the file system it
# loads KEY.js, a classic script.
PRELOAD = """<script>(() => {
  const served = location.protocol === "http:" || location.protocol === "https:";
  function preload(href, as) {
    const link = Object.assign(document.createElement("link"), { rel: "preload", href, as });
    if (as === "fetch") link.crossOrigin = "anonymous";
    document.head.append(link);
  }
  preload(%(gpt_script)s, "script");
  for (const key of %(keys)s) preload(`%(folder)s/${key}.${served ? "gptw" : "js"}`, served ? "fetch" : "script");
})();</script>
"""


def preload_weights(app, pagename, templatename, context, doctree) -> None:
    keys = saved_weights_keys(context.get("body", ""))
    if keys:
        context["metatags"] = context.get("metatags", "") + PRELOAD % {
            "gpt_script": json.dumps(f"{WEIGHTS_DIR}/{GPT_SCRIPT}"), "keys": json.dumps(keys), "folder": WEIGHTS_DIR}


def setup(app):
    app.connect("html-page-context", preload_weights)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
