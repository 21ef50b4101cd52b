"""Driving an open JupyterLab page: run a notebook, read its outputs, find widgets."""

from __future__ import annotations

from gptlib import COURSE_CONFIG, theorem_5_2


def open_notebook(page, lab, notebook: str, timeout_ms: int = 120_000) -> None:
    """Open a notebook in JupyterLab, as saved, and wait for its kernel."""
    base, token = lab
    page.goto(f"{base}/lab/tree/{notebook}?token={token}&reset")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=timeout_ms)
    page.locator("#jp-main-statusbar", has_text="Idle").wait_for(timeout=timeout_ms)


def open_and_run_all(page, lab, notebook: str, timeout_ms: int = 120_000) -> None:
    """Open a notebook in JupyterLab, wait for its kernel, run all cells and wait for them."""
    open_notebook(page, lab, notebook, timeout_ms)
    run_all(page, timeout_ms)


def run_all(page, timeout_ms: int = 120_000) -> None:
    """Run every cell of the open notebook and wait for them."""
    # Clear the stored outputs first, so that numbered prompts can only come from this run.
    page.evaluate("window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs')")
    page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
    page.wait_for_function(
        """() => {
            const cells = [...window.jupyterapp.shell.currentWidget.content.model.cells];
            return cells.filter(c => c.type === 'code').every(c => c.executionCount !== null);
        }""",
        timeout=timeout_ms,
    )
    page.locator("#jp-main-statusbar", has_text="Idle").wait_for(timeout=timeout_ms)


def open_notebook7(page, server, notebook: str, timeout_ms: int = 120_000) -> None:
    """Open a notebook in Notebook 7 (one notebook per page, no status bar), as saved, and wait for its kernel."""
    base, token = server
    page.goto(f"{base}/notebooks/{notebook}?token={token}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=timeout_ms)
    page.wait_for_function(
        "() => window.jupyterapp?.shell?.currentWidget?.sessionContext?.session?.kernel?.status === 'idle'",
        timeout=timeout_ms,
    )


# An explorer on screen, in whichever form its front end chose from its one output: drawn by its
# module (the live widget, or a static copy whose script ran), or the static copy's PNG where no
# script runs (an untrusted notebook in JupyterLab, a page without JavaScript).
EXPLORER_SHOWN = ".gptlib-explorer:visible, .gptlib-static img:visible"


def explorers_shown(cell, timeout_ms: int = 60_000) -> int:
    """How many explorers one cell shows, once it shows any (scrolled into view: a windowed
    notebook draws only the cells near the viewport)."""
    cell.scroll_into_view_if_needed()
    cell.locator(EXPLORER_SHOWN).first.wait_for(timeout=timeout_ms)
    return cell.locator(EXPLORER_SHOWN).count()


def explorers_per_cell(page, cell_selector: str) -> list[int]:
    """explorers_shown for every cell (cell_selector: the front end's cell element) holding an explorer."""
    cells = page.locator(cell_selector).filter(has=page.locator(".gptlib-explorer, .gptlib-static"))
    cells.first.wait_for(timeout=60_000)
    return [explorers_shown(cells.nth(i)) for i in range(cells.count())]


def code_cell(page, source: str):
    """The first code cell of the open notebook whose input contains `source`."""
    return page.locator(".jp-CodeCell", has=page.locator(".jp-InputArea", has_text=source)).first


def unrun_cell_shows_one_picture(page, source: str) -> None:
    """In the notebook as opened, before anything runs, the code cell containing `source` (an
    explorer) shows exactly one picture: the static copy's PNG, its script not run in a notebook
    that is not trusted."""
    cell = code_cell(page, source)
    cell.wait_for(timeout=120_000)
    assert explorers_shown(cell) == 1, f"the unrun cell {source!r} shows {explorers_shown(cell)} explorers"
    picture = cell.locator(".gptlib-static img:visible")
    assert picture.count() == 1 and picture.evaluate("img => img.complete && img.naturalWidth > 200")


def run_code(page, code: str) -> None:
    """Run `code` in the open notebook's kernel, as a learner's next cell would (its output is not shown)."""
    page.evaluate(
        """async (code) => {
            const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
            const reply = await kernel.requestExecute({code}).done;
            if (reply.content.status !== 'ok') throw new Error(`${reply.content.ename}: ${reply.content.evalue}`);
        }""",
        code,
    )


def output_texts(page) -> list[str]:
    """The text of every output of the open notebook, read from its model, not the DOM.

    JupyterLab does not render cells scrolled out of view, so DOM text can be empty.
    """
    return page.evaluate(
        """() => [...window.jupyterapp.shell.currentWidget.content.model.cells]
            .filter(c => c.type === 'code')
            .flatMap(c => c.outputs.toJSON())
            .map(o => o.text ?? (o.data && o.data['text/plain']) ?? o.evalue ?? '')
            .map(t => Array.isArray(t) ? t.join('') : t)"""
    )


def picture(css_class: str) -> str:
    """CSS selector of an explorer's picture: the Image widget's <img> carries the class itself
    (an Output widget's image sits inside the element with the class)."""
    return f"img.{css_class}, .{css_class} img"


def image_source(page, css_class: str, timeout_ms: int = 30_000) -> str:
    """The src of the PNG that the widget output area with this class shows (waits for one)."""
    image = page.locator(picture(css_class)).first
    image.wait_for(timeout=timeout_ms)
    return image.get_attribute("src")


def wait_for_new_image(page, css_class: str, old_src: str, timeout_ms: int = 30_000) -> str:
    """Wait until the widget's PNG differs from `old_src`; return the new src."""
    page.wait_for_function(
        """([selector, old]) => {
            const img = document.querySelector(selector);
            return img !== null && img.getAttribute('src') !== old;
        }""",
        arg=[picture(css_class), old_src],
        timeout=timeout_ms,
    )
    return image_source(page, css_class)


# Watches one explorer's picture: the time of the last key press (capture phase, before any
# widget sees it), the time the next new picture had loaded (decoded, ready to paint), and
# whether the <img> was ever removed or emptied meanwhile (a blank frame).
WATCH = """(selector) => {
    const img = document.querySelector(selector);
    const state = {start: null, done: null, blanked: false};
    window.__gptlibWatch?.stop();
    const onKey = () => { if (state.done === null) state.start = performance.now(); };
    const onLoad = () => { if (state.start !== null && state.done === null) state.done = performance.now(); };
    document.addEventListener('keydown', onKey, true);
    img.addEventListener('load', onLoad);
    const observer = new MutationObserver(records => {
        for (const record of records) {
            if ([...record.removedNodes].some(node => node === img || node.contains?.(img))) state.blanked = true;
            if (record.target === img && !img.getAttribute('src')) state.blanked = true;
        }
    });
    observer.observe(document.body, {subtree: true, childList: true, attributes: true, attributeFilter: ['src']});
    state.stop = () => {
        observer.disconnect();
        document.removeEventListener('keydown', onKey, true);
        img.removeEventListener('load', onLoad);
    };
    window.__gptlibWatch = state;
}"""


def round_trip_ms(page, css_class: str, act, timeout_ms: int = 30_000) -> float:
    """Milliseconds from the key press that `act()` makes to the explorer's next decoded picture.

    Fails if the picture was blanked or removed on the way (updates must happen in place).
    """
    page.evaluate(WATCH, picture(css_class))
    act()
    page.wait_for_function("() => window.__gptlibWatch.done !== null", timeout=timeout_ms)
    start, done, blanked = page.evaluate(
        "() => { const w = window.__gptlibWatch; w.stop(); return [w.start, w.done, w.blanked]; }"
    )
    assert not blanked, f"the {css_class} picture went blank during an update"
    assert start is not None, "no key press reached the page"
    return done - start


def picture_digest(page, css_class: str) -> str:
    """SHA-256 of the bytes the explorer's picture shows (its blob URL changes on any widget
    change, even a CSS class, so compare contents, not URLs)."""
    return page.evaluate(
        """async (selector) => {
            const bytes = await (await fetch(document.querySelector(selector).src)).arrayBuffer();
            const digest = await crypto.subtle.digest('SHA-256', bytes);
            return [...new Uint8Array(digest)].map(b => b.toString(16).padStart(2, '0')).join('');
        }""",
        picture(css_class),
    )


def offset_in(outer, inner) -> tuple[float, float, float, float]:
    """inner's box relative to outer's top-left corner: what a jump inside a widget changes,
    and what scrolling the page (which moves both) does not."""
    # Both boxes in one frame: measured one after the other, a scroll still in progress (JupyterLab
    # bringing a focused box into view) moved the second and looked like a jump of hundreds of pixels.
    return tuple(inner.evaluate(
        "(e, o) => { const b = e.getBoundingClientRect(), a = o.getBoundingClientRect();"
        " return [b.x - a.x, b.y - a.y, b.width, b.height]; }",
        outer.element_handle(),
    ))


def settled_offset_in(page, outer, inner, tries: int = 20) -> tuple[float, float, float, float]:
    """offset_in once two reads half a second apart agree: widgets apply their layouts
    asynchronously after rendering, so a box measured too early can still move by itself."""
    previous = offset_in(outer, inner)
    for _ in range(tries):
        page.wait_for_timeout(500)
        current = offset_in(outer, inner)
        if current == previous:
            return current
        previous = current
    raise AssertionError(f"the layout kept moving: last offset {current}")


# Watches an explorer drawn in the page: the time of the last key event `startOn` (capture phase,
# before any widget sees it: 'keydown', or 'keyup' for a control the browser activates when the key
# is released) and the time its front end next drew a frame (its root's data-frames attribute
# changes inside the requestAnimationFrame callback that draws, just before the browser paints).
FRAME_WATCH = """([root, startOn]) => {
    const state = {start: null, done: null};
    window.__gptlibFrames?.stop();
    const onKey = () => { if (state.done === null) state.start = performance.now(); };
    document.addEventListener(startOn, onKey, true);
    const observer = new MutationObserver(() => {
        if (state.start !== null && state.done === null) state.done = performance.now();
    });
    observer.observe(root, {attributes: true, attributeFilter: ['data-frames']});
    state.stop = () => { observer.disconnect(); document.removeEventListener(startOn, onKey, true); };
    window.__gptlibFrames = state;
}"""


def frame_ms(root, act, timeout_ms: int = 30_000, start_on: str = "keydown") -> float:
    """Milliseconds from the key press that `act()` makes to the next frame the explorer `root`
    (a Playwright locator of its .gptlib-explorer element) draws. The clock starts at the key's
    `start_on` event: "keyup" for Space on a button or checkbox, which acts only when released
    (from keydown, the time the key is held, by a driver or a hand, would count as the page's)."""
    root.evaluate(f"(root) => ({FRAME_WATCH})([root, {start_on!r}])")
    act()
    root.page.wait_for_function("() => window.__gptlibFrames.done !== null", timeout=timeout_ms)
    start, done = root.page.evaluate(
        "() => { const w = window.__gptlibFrames; w.stop(); return [w.start, w.done]; }"
    )
    assert start is not None, "no key press reached the page"
    return done - start


def live(page, css_class: str):
    """The kernel's explorer with this class, not a static copy (whose module draws one too)."""
    return page.locator(f".{css_class}:not(.gptlib-static *):visible").first


def saved(page, css_class: str):
    """The static copy of an explorer: the module running on the saved values (the book, saved HTML)."""
    return page.locator(f".gptlib-static .{css_class}:visible").first


def saved_count_counts_six_blocks(page) -> None:
    """The saved count explorer on this page answers L = 6 with Theorem 5.2's count by itself and says
    that the measured count needs a running kernel (the book, a notebook saved as HTML)."""
    count = saved(page, "gptlib-count")
    blocks = count.locator(".gptlib-count-L input")
    blocks.fill("6")
    frame_ms(count, lambda: blocks.press("Enter"))
    six_blocks = theorem_5_2(COURSE_CONFIG.replace(L=6))
    assert f"Theorem 5.2: {six_blocks:,} parameters" in count.locator(".gptlib-count-theorem").inner_text()
    assert "needs a running kernel" in count.locator(".gptlib-count-message").inner_text()


def run_cell(page, notebook: str, source: str, timeout_ms: int = 120_000) -> None:
    """In the open notebook, run only the first code cell whose source contains `source` (a cell that
    needs no earlier one: the explorer cells of notebooks 04 and 05)."""
    index = page.evaluate(
        """(source) => {
            const notebook = window.jupyterapp.shell.currentWidget.content;
            const index = [...notebook.model.cells]
                .findIndex(c => c.type === 'code' && c.sharedModel.getSource().includes(source));
            notebook.activeCellIndex = index;
            return index;
        }""",
        source,
    )
    assert index >= 0, f"no code cell of {notebook} contains {source!r}"
    page.evaluate("window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs')")
    page.evaluate("window.jupyterapp.commands.execute('notebook:run-cell')")
    page.wait_for_function(
        """(index) => [...window.jupyterapp.shell.currentWidget.content.model.cells][index].executionCount !== null""",
        arg=index,
        timeout=timeout_ms,
    )


def open_explorer(page, lab, notebook: str, call: str, css_class: str, run: str | None = None):
    """Open `notebook` in JupyterLab as a learner would and return its live explorer (css_class), in view.

    Before anything runs, the cell holding `call` shows one picture (its static copy); then `run` runs
    (the source of the one cell to run, or every cell when None), and the cell shows the widget alone,
    not its static copy beside it."""
    open_notebook(page, lab, notebook)
    unrun_cell_shows_one_picture(page, call)
    if run is None:
        run_all(page)
    else:
        run_cell(page, notebook, run)
    explorer = live(page, css_class)
    explorer.scroll_into_view_if_needed()
    assert explorers_shown(code_cell(page, call)) == 1, f"{call!r} shows more than its widget once run"
    return explorer
