"""`make book`: the static site of the executed notebooks (tools/build_book.py).

The build itself runs with warnings as errors (the `book_html` fixture); these tests check
what a reader gets without a network. tests/browser/test_book_in_browser.py opens it in a browser.
"""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.notebook_files import NOTEBOOKS
from tools.build_book import sphinx_build

pytestmark = pytest.mark.slow  # starts processes or trains: `pytest -m slow` (not in `pytest -m unit`)

ROOT = Path(__file__).resolve().parents[2]


def test_left_hand_contents_list_every_notebook_in_lecture_order(book_html):
    index = (book_html / "index.html").read_text()
    nav = re.search(r'<nav class="[^"]*bd-docs-nav.*?</nav>', index, re.S).group()
    assert re.findall(r'href="([^"#]+)\.html"', nav) == [path.stem for path in NOTEBOOKS]


def test_every_page_loads_its_scripts_styles_and_images_from_the_site(book_html):
    pages = sorted(book_html.glob("*.html"))
    assert {page.stem for page in pages} >= {path.stem for path in NOTEBOOKS} | {"index", "search"}
    for page in pages:
        html = page.read_text()
        resources = re.findall(r'<(?:script|img)[^>]*\ssrc="([^"]+)"', html)
        resources += re.findall(r'<link[^>]*\shref="([^"]+)"', html)
        assert resources, page.name
        for resource in resources:
            assert not re.match(r"^(https?:)?//", resource), f"{page.name} loads {resource} from the network"
            if not resource.startswith(("data:", "#")):
                assert (book_html / resource.split("?")[0]).is_file(), f"{page.name}: {resource} is missing"


def test_math_is_rendered_by_a_mathjax_shipped_with_the_site(book_html):
    html = (book_html / "04_layernorm_geometry.html").read_text()
    assert 'src="_static/mathjax_after_explorers.js' in html  # where MathJax's script would stand; it loads it later
    assert '"mathjax/tex-chtml.js"' in (book_html / "_static" / "mathjax_after_explorers.js").read_text()
    assert (book_html / "_static" / "mathjax" / "tex-chtml.js").is_file()
    assert r"\(\mathbf 1^\perp\)" in html  # the prose's $\mathbf 1^\perp$, left for MathJax to typeset


def test_a_warning_fails_the_build(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(ROOT / "book", src, ignore=shutil.ignore_patterns("__pycache__", "index.md"))
    (src / "index.md").write_text("# A page\n\nA link to [a notebook that is not there](99_missing.ipynb).\n")
    with pytest.raises(subprocess.CalledProcessError):
        sphinx_build(src, tmp_path)


def test_only_the_pages_whose_explorers_run_the_model_preload_its_files(book_html):
    """book/preload_weights.py: the shipped weights that a page's static copies name, and gpt.js's text, and no
    other page preloads anything."""
    from gptlib.viz.page_model import saved_weights_keys, shipped_weights

    preloading = {page.stem for page in book_html.glob("*.html") if 'rel: "preload"' in page.read_text()}
    assert preloading == {"01_multi_head_attention", "08_trained_model_tour", "10_reading_the_residual_stream"}
    for name in preloading:
        html = (book_html / f"{name}.html").read_text()
        head = html.split("</head>")[0]
        named = set(saved_weights_keys(html))
        assert named and named <= set(shipped_weights()) and all(f'"{key}"' in head for key in named), name
        assert "gptlib-weights/gpt-source.js" in head, name
