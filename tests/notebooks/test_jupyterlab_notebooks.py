"""Notebooks 02–04 in a real JupyterLab, in headless Chromium, as a new user runs them.

Each notebook is copied into a throw-away JupyterLab, opened in Chromium and
run from the Run menu.  While it runs, the device-load source of every board
in the page is sampled as BokehJS holds it: every sample must have columns of
one length.  At the end every code cell has run, no cell shows an error, the
boards show at least one device row, and the browser console showed no Bokeh
error and no "inconsistent lengths" warning.  Notebook 01 has its own test
(``test_jupyterlab_01.py``).  A screenshot of each goes to ``test-artifacts/``.
"""

from __future__ import annotations

import os
import shutil
import time

import pytest

from tests.browser import chromium, screenshot
from tests.views.jupyterlab import NEEDS_BROWSER, jupyter_lab
from tests.views.test_jupyterlab import (kernel_processes, open_notebook, run_all_cells,
                                         shut_down_kernels, wait_for)

from .run import NOTEBOOKS

pytestmark = NEEDS_BROWSER

DEVICE_LOADS = """() => {
  // Column lengths of every device-load source BokehJS holds in the page.
  const out = [];
  for (const doc of (window.Bokeh && window.Bokeh.documents) || []) {
    for (const m of doc.all_models) {
      if (m.name === "labkit-device-load-source") {
        const data = m.data;
        const cols = data instanceof Map ? [...data.entries()] : Object.entries(data || {});
        const lengths = {};
        for (const [k, v] of cols) lengths[k] = v.length;
        out.push(lengths);
      }
    }
  }
  return out;
}"""

PROMPTS = """() => [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputPrompt')]
  .map((e) => e.textContent.trim())"""


def _all_ran(page, n_code: int) -> bool:
    """Every code cell shows an execution count (``[7]:``), none a star."""
    prompts = page.evaluate(PROMPTS)
    return len(prompts) == n_code and all(p.startswith("[") and p[1:-2].isdigit()
                                          for p in prompts)


@pytest.mark.timeout(400)
@pytest.mark.parametrize("name", ["02-data-parallel-torch.ipynb",
                                  "03-pipelines-and-programs.ipynb", "04-ensembles.ipynb"])
def test_notebook_in_jupyterlab(name):
    import nbformat
    n_code = sum(c.cell_type == "code"
                 for c in nbformat.read(os.path.join(NOTEBOOKS, name), as_version=4).cells)
    with jupyter_lab() as (url, token, root_dir):
        shutil.copy(os.path.join(NOTEBOOKS, name), os.path.join(root_dir, name))
        console: list[str] = []
        try:
            with chromium() as browser:
                page = browser.new_page(viewport={"width": 1400, "height": 1200})
                page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
                page.on("pageerror", lambda e: console.append(f"pageerror: {e}"))
                open_notebook(page, url, token, name)
                run_all_cells(page)
                samples = []
                deadline = time.monotonic() + 240
                while time.monotonic() < deadline and not _all_ran(page, n_code):
                    samples.extend(page.evaluate(DEVICE_LOADS))
                    page.wait_for_timeout(100)
                assert _all_ran(page, n_code), page.evaluate(PROMPTS)
                screenshot(page, f"jupyterlab-{name.split('-')[0]}-final")
                stderr = page.locator(".jp-OutputArea-output[data-mime-type="
                                      "'application/vnd.jupyter.stderr']")   # errors too
                tracebacks = [t for t in stderr.all_inner_texts() if "Traceback" in t]
                assert not tracebacks, tracebacks[0][:2000]
                final = wait_for("a device row on the boards", lambda: [
                    s for s in page.evaluate(DEVICE_LOADS) if s and min(s.values()) > 0],
                    timeout=30, page=page, describe=lambda: page.evaluate(DEVICE_LOADS))
                samples.extend(final)
        finally:
            shut_down_kernels(url, token)
        wait_for("the kernel and its Dask processes to exit", lambda: not kernel_processes(),
                 timeout=60, describe=kernel_processes)
    uneven = [s for s in samples if s and len(set(s.values())) != 1]
    assert not uneven, uneven[:3]
    bad = [m for m in console if "inconsistent" in m.lower() or m.startswith("pageerror")
           or (m.startswith("error") and "bokeh" in m.lower())]
    assert not bad, bad[:10]
