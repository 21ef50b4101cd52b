"""A notebook saved as one HTML file (`python -m gptlib html`, gptlib.viz.page_export), alone in a folder and
opened from the file system with the network blocked: its explorers run typed text as torch does."""

import torch

from gptlib.viz.attention import attention_run
from gptlib.viz.page_export import export
from tests.support.browser.servers import offline_context
from tests.support.browser.static_pages import ATTENTION_NUMBERS, TYPED, tolerance, typed_into
from tests.support.notebook_files import NOTEBOOKS

# What nbconvert's page itself asks of a CDN (require.js, MathJax 2): refused offline, the math then left as TeX.
NBCONVERT_CDN = "https://cdnjs.cloudflare.com/"


def test_a_single_file_page_runs_typed_text_with_nothing_beside_it(browser, course, tmp_path):
    notebook = next(path for path in NOTEBOOKS if path.name.startswith("01_"))
    page_file, keys = export(notebook, tmp_path / "01.html")
    assert [path.name for path in tmp_path.iterdir()] == ["01.html"] and keys
    context = offline_context(browser)
    page = context.new_page()
    problems, requested = [], []
    page.on("console", lambda msg: msg.type == "error" and not msg.location["url"].startswith(NBCONVERT_CDN)
            and problems.append(f"console: {msg.text}"))
    page.on("pageerror", lambda exc: problems.append(f"uncaught: {exc}"))
    page.on("request", lambda request: requested.append(request.url))
    page.goto(page_file.as_uri())
    explorer, text = typed_into(page, "gptlib-attn-explorer", TYPED)
    seen = explorer.evaluate(ATTENTION_NUMBERS)
    context.close()
    run = attention_run(course, text)
    assert seen["T"] == len(text)
    page_A = torch.tensor(seen["A"]).reshape(run.A.shape)
    assert torch.allclose(page_A, run.A, atol=1e-6, rtol=0), (page_A - run.A).abs().max()
    assert torch.allclose(torch.tensor(seen["norms"]).reshape(run.write_norms.shape), run.write_norms, rtol=0,
                          atol=tolerance(run.write_norms))
    assert not problems
    # nothing read from beside the page; from elsewhere only what nbconvert's own page asks for
    assert [url for url in requested if not url.startswith(("file:", "data:", "blob:", NBCONVERT_CDN))] == []
    assert not [url for url in requested if "gptlib-weights" in url]
