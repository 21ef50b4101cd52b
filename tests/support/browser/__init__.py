"""A real JupyterLab, Notebook 7 or Voila server and headless Chromium (servers), and the driver of an
open JupyterLab page (jupyterlab_driver): used by benchmarks.roundtrip and by the browser tests."""
