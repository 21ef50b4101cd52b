"""Sphinx configuration of the companion's book: the executed notebooks as a static site.

`make book` (tools/build_book.py) stages this folder and notebooks/[0-9]*.ipynb side by side
and builds them with warnings as errors. Nothing is re-executed: the pages show the outputs
committed with the notebooks, which CI keeps current with nbval.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # for slugs.py, hidden_cells.py and preload_weights.py

project = "gptlib: a companion to Lecture 5, The Transformer"
author = "the gptlib authors"
html_title = "Lecture 5 companion"

extensions = [
    "myst_nb",
    "sphinx-mathjax-offline",  # MathJax 3 copied into the site, so math renders with no network
    "hidden_cells",  # after myst_nb: its hidden cells' toggles named by their visible text
    "preload_weights",  # a page whose explorers run the model fetches its weights from the start
]
exclude_patterns = ["_build", "**.ipynb_checkpoints", "conf.py"]

nb_execution_mode = "off"  # the committed outputs, never a re-run
nb_ipywidgets_js = {}  # a static page has no kernel for widgets: load no widget renderer from a CDN
# ... so never choose a widget view: an explorer's output (gptlib/viz/explorer.py) holds its static
# copy beside it, which the book shows instead.
nb_mime_priority_overrides = [("*", "application/vnd.jupyter.widget-view+json", None)]
myst_enable_extensions = ["dollarmath", "amsmath"]
html_static_path = ["_static"]
# Heading anchors as JupyterLab makes them ("Your turn" -> #Your-turn), so one link in a
# notebook works in JupyterLab and in the book alike.
myst_heading_anchors = 3
myst_heading_slug_func = "slugs.jupyterlab_slug"

html_theme = "sphinx_book_theme"
html_theme_options = {
    "show_navbar_depth": 1,
    "home_page_in_toc": True,
    "use_download_button": True,
}
# The figures have white backgrounds; and unset, the theme logs a console error on every page.
html_context = {"default_mode": "light"}


def load_mathjax_after_explorers(app, config) -> None:
    """MathJax is loaded, and typesets, once the page's explorers have drawn: _static/mathjax_after_explorers.js
    stands where MathJax's own script would (sphinx-mathjax-offline sets mathjax_path as it loads; this runs
    after). MathJax's start-up and typesetting would otherwise delay their first picture."""
    config.mathjax_path = "mathjax_after_explorers.js"


def setup(app):
    app.connect("config-inited", load_mathjax_after_explorers)
