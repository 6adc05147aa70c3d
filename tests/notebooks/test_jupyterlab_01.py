"""Notebook 01 in a real JupyterLab, in headless Chromium: run all, board at 100%, plots drawn.

The repository's ``notebooks/01-parallel-flows.ipynb`` is copied into a
throw-away JupyterLab's root, opened in Chromium and run from the Run menu.
The DOM must show the board's phase rows at 100%, the node-state plots drawn
by BokehJS (a line plot per trained node with points in it) and the result
plot's canvas; screenshots go to ``test-artifacts/``.  While the run goes on,
the worker-load plot's source in the page must hold one row per worker in every
column (the same length: no "inconsistent lengths"), with bars; the browser
console must show no Bokeh error or inconsistent-length warning all along.
With the output 700 px wide no board text is cut off; the board went through
at least three states before its last; the lag from an event to the page is measured
(``test-artifacts/lag-01.json``).  The kernel is shut down
at the end and its Dask processes must exit with it.
"""

from __future__ import annotations

import os
import re
import shutil
import time

import pytest

from tests.browser import chromium, screenshot
from tests.views.jupyterlab import NEEDS_BROWSER, lab_for_a_test
from tests.views.test_jupyterlab import (accept_kernel_dialog, bokeh_canvases, cell_output_text,
                                         kernel_processes, open_notebook, phase_labels,
                                         run_all_cells, shut_down_kernels, wait_for)

from . import live
from .run import NOTEBOOKS
from .test_jupyterlab_notebooks import DEVICE_LOADS

pytestmark = NEEDS_BROWSER

NAME = "01-parallel-flows.ipynb"
RUN_CELL, PLOT_CELL, LAST_CELL = 3, 8, 9

NODE_PLOTS = """() => {
  // Points in the node-state plots that BokehJS holds in the page, by plot name.
  const out = {};
  for (const doc of (window.Bokeh && window.Bokeh.documents) || []) {
    for (const m of doc.all_models) {
      if (m.name && m.name.startsWith("labkit-node-plot-")) {
        let points = 0;
        for (const r of m.renderers) {
          const data = r.data_source && r.data_source.data;
          const x = data instanceof Map ? data.get("x") : (data || {}).x;
          points = Math.max(points, x ? x.length : 0);
        }
        out[m.name] = points;
      }
    }
  }
  return out;
}"""





@pytest.mark.timeout(300)
def test_notebook_01_in_jupyterlab(lab):
    with lab_for_a_test(lab) as (url, token, root_dir):
        shutil.copy(os.path.join(NOTEBOOKS, NAME), os.path.join(root_dir, NAME))
        try:
            with chromium() as browser:
                page = browser.new_page(viewport={"width": 1400, "height": 1200})
                console: list[str] = []
                page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
                page.on("pageerror", lambda e: console.append(f"pageerror: {e}"))
                uneven = run_and_check(page, url, token)
                bad = [m for m in console if m.startswith("pageerror")
                       or (m.startswith("error") and "bokeh" in m.lower())]
                assert not bad, bad[:10]
                # BokehJS warns of "inconsistent lengths" when it renders a source while its
                # columns differ (as during a patch); what must never be seen is a source
                # left uneven: every source is sampled while the run goes on and at the end
                assert not [found for found in uneven if found], uneven[:3]
        finally:
            ids = shut_down_kernels(url, token)
        assert ids, "no kernel was running"
        wait_for("the kernel and its Dask processes to exit", lambda: not kernel_processes(),
                 timeout=60, describe=kernel_processes)


def run_and_check(page, url: str, token: str) -> list:
    """Run the notebook and check the board; returns the uneven sources sampled (none)."""
    open_notebook(page, url, token, NAME)
    live.narrow_outputs(page)
    live.watch(page)
    run_all_cells(page)
    boards = page.locator(".jp-OutputArea-output .labkit-board")
    wait_for("the board", lambda: accept_kernel_dialog(page) or boards.count() > 0,
             timeout=120, page=page)
    board = boards.first
    board.scroll_into_view_if_needed()
    screenshot(page, "notebook-01-board")
    samples = []                                 # the worker-load source, sampled as it runs
    uneven = []                                  # any data source with uneven columns
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        samples.extend(page.evaluate(DEVICE_LOADS))   # the board's (the only one here)
        uneven.append(page.evaluate(live.UNEVEN_SOURCES))
        labels = phase_labels(board)
        if len(labels) == 2 and all("100%" in label for label in labels):
            break
        page.wait_for_timeout(50)
    seen = [lengths for lengths in samples if lengths]
    assert seen, "the worker-load source never reached the page"
    assert all(len(set(lengths.values())) == 1 for lengths in seen), \
        [lengths for lengths in seen if len(set(lengths.values())) != 1][:3]
    wait_for("the worker-load plot with a row per worker", lambda: _consistent_rows(page) >= 2,
             timeout=30, page=page, describe=lambda: page.evaluate(DEVICE_LOADS))
    wait_for("every phase row at 100%",
             lambda: len(phase_labels(board)) == 2
             and all("100%" in label for label in phase_labels(board)),
             timeout=120, page=page, describe=lambda: phase_labels(board))
    wait_for("the last cell's output",
             lambda: "scheduler closed: True" in cell_output_text(page, LAST_CELL),
             timeout=120, page=page, describe=lambda: cell_output_text(page, LAST_CELL))
    assert "test accuracy" in cell_output_text(page, 6)
    wait_for("the node-state plots of PCA and the classifier, with points",
             lambda: len(node_plots(page)) >= 2 and all(node_plots(page).values()),
             timeout=30, page=page, describe=lambda: node_plots(page))
    assert bokeh_canvases(board) > 0
    board.scroll_into_view_if_needed()
    screenshot(page, "notebook-01-board-final")
    plot = page.locator(".jp-Notebook .jp-Cell").nth(PLOT_CELL)
    wait_for("the result plot's canvas", lambda: plot.locator("canvas").count() > 0,
             timeout=30, page=page)
    plot.scroll_into_view_if_needed()
    screenshot(page, "notebook-01-result-plot")
    errors = board.locator(".labkit-errors-title")
    assert not errors.count(), board.locator(".labkit-errors").inner_text()
    check_live(page)
    uneven.append(page.evaluate(live.UNEVEN_SOURCES))
    return uneven


def check_live(page) -> None:
    """The board fits 700 px, went through states while running, and trailed little."""
    lags, frames = live.lags(page), live.frames(page)
    summary = live.record_lags("01", lags, seen=frames, kernel=live.lags(page, "kernel"),
                               draw=live.lags(page, "draw"), wire=live.lags(page, "wire"))
    print(summary)
    clipped = live.clipped(page)
    assert not clipped, clipped[:5]
    seen = live.states(page)
    # the run lasts about a second here: at least three states before the last one
    assert len(seen[0]) >= 4, [len(s) for s in seen]
    counts = {m for text in seen[0] for m in re.findall(r"\d+/\d+ \(\d+%\)", text)}
    # a count that grew, not only the final one, whenever the page got the run in two frames
    # or more and the first held at most half of its events.  Beside a second test run
    # (load 8-10) the board was made 0.9 s after the run's first event, when its last had
    # come: its first frame held all 169 (issue 44).  In a CI run the first frame came
    # 0.45 s in with 143 of them, the training's 24 tasks all done, and two frames of the
    # last events followed: it could only show the final count.  Alone the first frame
    # comes 0.2 s in (11 events of 28 in two frames, here).
    with_events = [f for f in frames if f["events"]]
    first_half = with_events and with_events[0]["events"] <= sum(
        f["events"] for f in with_events) / 2
    if len(with_events) >= 2 and first_half:
        assert len(counts) >= 2, (sorted(counts), with_events)
    assert lags and summary["median_s"] <= live.LAG_BOUND, summary


def node_plots(page) -> dict:
    return page.evaluate(NODE_PLOTS) or {}


def _consistent_rows(page) -> int:
    """Rows of the worker-load source in the page; 0 unless every column has that many."""
    loads = page.evaluate(DEVICE_LOADS) or [{}]
    sizes = set(loads[0].values())
    return sizes.pop() if len(sizes) == 1 else 0
