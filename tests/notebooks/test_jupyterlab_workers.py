"""A fit on Dask workers in a real JupyterLab: its board is live, and ends on the record's numbers.

The notebook starts two worker processes, puts a Dask array on them and
trains a slowed model with the loop on the workers while the trainer's board
is shown.  While the fit runs, the page's BokehJS is sampled: the loss curve
(one point a step) grows through several lengths and each worker's row
shows samples per second.  At the end the fit's bar reads "epoch 4/4 · … · finished" and each row of the
board's table of epochs reads the loss, samples/s, seconds and steps of the
record ``fit`` returned (printed as JSON).
"""

from __future__ import annotations

import json
import re
import time

import pytest

from labkit.views.words import seconds
from tests.browser import chromium, screenshot
from tests.views.jupyterlab import NEEDS_BROWSER, lab_for_a_test
from tests.views.test_jupyterlab import (cell_output_text, kernel_processes, open_notebook,
                                         phase_labels, run_all_cells, shut_down_kernels,
                                         wait_for, write_notebook)

pytestmark = NEEDS_BROWSER

NOTEBOOK = "workers.ipynb"
EPOCHS, STEPS = 4, 12
CELLS = [
    "import json, time\n"
    "import dask.array as da, numpy as np, torch\n"
    "import labkit as lk\n"
    "s = lk.DaskScheduler(mode='processes', n_workers=2)\n"
    "rng = np.random.default_rng(0)\n"
    f"x = rng.normal(size=({STEPS * 50}, 10)).astype(np.float32)\n"
    "y = (x[:, 0] > 0).astype(np.int64)\n"
    "X, Y = da.from_array(x, chunks=(150, 10)), da.from_array(y, chunks=150)\n"
    "class Slow(torch.nn.Module):\n"
    "    def forward(self, t):\n"
    "        time.sleep(0.08)   # a step of about a tenth of a second\n"
    "        return t\n"
    "torch.manual_seed(0)\n"
    "net = torch.nn.Sequential(Slow(), torch.nn.Linear(10, 2))\n"
    "trainer = lk.DataParallelTrainer(net, torch.nn.functional.cross_entropy,\n"
    "                                 torch.optim.SGD(net.parameters(), lr=0.5), scheduler=s)",

    "lk.board(trainer)",

    f"history = trainer.fit((X, Y), batch_size=50, epochs={EPOCHS}, seed=0)\n"
    "print('HISTORY ' + json.dumps(history))",

    "trainer.close()\n"
    "s.shutdown()\n"
    "print('closed')",
]

LIVE = """() => {
  // The loss curve's length and each worker's samples/s, as BokehJS holds them.
  const out = {loss: -1, rates: []};
  for (const doc of (window.Bokeh && window.Bokeh.documents) || []) {
    for (const m of doc.all_models) {
      const name = m.name || "";
      if (name.startsWith("labkit-node-plot-")) {
        for (const r of m.renderers || []) {
          const data = r.data_source && r.data_source.data;
          const y = data instanceof Map ? data.get("y") : data && data.y;
          if (y) out.loss = Math.max(out.loss, y.length);
        }
      }
      if (name === "labkit-device-load-source") {
        const data = m.data;
        const rates = data instanceof Map ? data.get("samples_per_s") : data.samples_per_s;
        out.rates = Array.from(rates || []);
      }
    }
  }
  return out;
}"""


@pytest.mark.timeout(400)
def test_a_fit_on_workers_shows_live_and_ends_on_the_records_numbers(lab):
    with lab_for_a_test(lab) as (url, token, root_dir):
        write_notebook(root_dir, CELLS, NOTEBOOK)
        try:
            with chromium() as browser:
                page = browser.new_page(viewport={"width": 1400, "height": 1100})
                open_notebook(page, url, token, NOTEBOOK)
                run_all_cells(page)
                samples = _watch(page)
                board = page.locator(".jp-OutputArea-output .labkit-board").first
                outer = board.locator(".widget-html.labkit-fit-outer-label")
                wait_for("the fit's bar at its last epoch, finished",
                         lambda: outer.count() and re.match(rf"epoch {EPOCHS}/{EPOCHS} · .* · "
                                                            r"finished", outer.inner_text()),
                         timeout=60, page=page, describe=lambda: phase_labels(board))
                table = board.locator("table.labkit-epochs tr")
                # the kernel sends the table before the bar's "finished" (tests/views/
                # test_board.py); the page renders each widget on its own
                wait_for("a row for every epoch", lambda: table.count() == EPOCHS + 1,
                         timeout=30, page=page, describe=lambda: table.all_inner_texts())
                rows = [r.split("\t") for r in table.all_inner_texts()[1:]]
                screenshot(page, "jupyterlab-workers-final")
                out = cell_output_text(page, 2)
        finally:
            shut_down_kernels(url, token)
        wait_for("the kernel and its Dask processes to exit", lambda: not kernel_processes(),
                 timeout=60, describe=kernel_processes)
    lengths = sorted({s["loss"] for s in samples if s["loss"] > 0})
    assert len(lengths) >= 3, f"the loss curve never grew while the fit ran: {lengths}"
    assert any(len(s["rates"]) == 2 and min(s["rates"]) > 0 for s in samples), samples[-5:]
    history = json.loads(re.search(r"HISTORY (\[.*\])", out).group(1))
    assert [h["epoch"] for h in history] == list(range(1, EPOCHS + 1))
    # the board's table of epochs reads the record fit returned, with the same rounding
    assert [[c.strip() for c in row] for row in rows] == [
        [str(r["epoch"]), f"{r['loss']:.4g}", f"{r['samples_per_s']:,.0f}",
         seconds(r["seconds"]), str(r["steps"])] for r in history], (rows, history)
    assert all(r["steps"] == STEPS for r in history)


def _watch(page) -> list[dict]:
    """Sample the page while the fit runs, until its history is printed."""
    samples, deadline = [], time.monotonic() + 240
    while time.monotonic() < deadline:
        samples.append(page.evaluate(LIVE))
        if "HISTORY" in cell_output_text(page, 2):
            return samples
        page.wait_for_timeout(150)
    raise AssertionError(f"the fit did not end in time (last sample {samples[-1:]})")
