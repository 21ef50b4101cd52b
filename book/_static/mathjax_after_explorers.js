// MathJax, loaded once the page's explorers have drawn: book/conf.py names this file as the book's MathJax
// (mathjax_path), so it stands, deferred, in each page with mathematics where MathJax itself would. MathJax's
// script (1.1 MB) takes a task of about 70 ms to start and its typesetting one of about 300 ms for page 01 on
// a 2-core machine; loaded at once, both came before the explorers' first picture and their model.
// An explorer has drawn once its picture has had a frame (data-frames, gptlib/viz/js/common.js) and its
// model in the page is no longer loading (data-page-model, gptlib/viz/js/inpage.js); the math waits for
// that at most WAIT_MS. window.gptlibMath: a promise that resolves once the page's math is typeset.
const WAIT_MS = 3000;
const MATHJAX = new URL("mathjax/tex-chtml.js", document.currentScript.src);  // sphinx-mathjax-offline's copy

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
}).then(() => new Promise((resolve, reject) => {
  const script = Object.assign(document.createElement("script"), { src: MATHJAX.href });
  script.onload = resolve;
  script.onerror = () => reject(new Error(`MathJax could not be loaded from ${MATHJAX.href}`));
  document.head.append(script);
})).then(() => window.MathJax.startup.promise);  // resolves once MathJax has typeset the page
