// The book typesets its mathematics after the page's explorers have drawn (conf.py turns MathJax's own
// typesetting at start-up off). MathJax typesets a page in one long task, about 300 ms for page 01 on a
// 2-core machine, which would otherwise come before the explorers' first picture and their model.
// An explorer has drawn once its picture has had a frame (data-frames, gptlib/viz/js/common.js) and its
// model in the page is no longer loading (data-page-model, gptlib/viz/js/inpage.js); the math waits for
// that at most WAIT_MS. window.gptlibMath: a promise that resolves once the page's math is typeset.
const WAIT_MS = 3000;

function explorersHaveDrawn() {
  return [...document.querySelectorAll(".gptlib-static")].every((host) => {
    const explorer = host.querySelector(".gptlib-explorer");
    return explorer && Number(explorer.dataset.frames) >= 1 && explorer.dataset.pageModel !== "loading";
  });
}

window.gptlibMath = new Promise((resolve) => {
  const since = performance.now();
  (function wait() {
    // once they have drawn, one frame more so that their picture is painted before MathJax starts
    if (explorersHaveDrawn() || performance.now() - since > WAIT_MS) requestAnimationFrame(() => setTimeout(resolve));
    else requestAnimationFrame(wait);
  })();
}).then(() => window.MathJax?.startup.promise.then(() => window.MathJax.typesetPromise()));  // a page with no math has no MathJax
