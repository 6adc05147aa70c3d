"""End to end: Cancel on the board stops a run while another cell blocks in ``run.result()``.

Run All runs a cell that shows a slow run's board, then a cell that waits in
``run.result()``: the kernel's main thread is busy until the run ends.  The
test clicks the board's Cancel button meanwhile.  The click reaches a kernel
subshell (``labkit.views.busy_kernel``), so the run stops at once: the waiting
cell prints how long after it started it raised ``CancelledError``, which must
be within 2 s of the click, and the board says "cancelled".
"""

from __future__ import annotations

import re
import time

import pytest

from tests.browser import chromium, screenshot
from tests.views.jupyterlab import NEEDS_BROWSER, lab_for_a_test
from tests.views.test_jupyterlab import (cell_output_text, kernel_processes, open_notebook,
                                         phase_labels, run_all_cells, shut_down_kernels, wait_for,
                                         write_notebook)

pytest.importorskip("playwright")
pytest.importorskip("jupyterlab")
pytestmark = NEEDS_BROWSER

NOTEBOOK = "cancel.ipynb"
WAIT_CELL = 2
CELLS = [
    "import time\n"
    "import numpy as np\n"
    "import labkit as lk\n"
    "from tests.helpers import SlowPCA\n"
    "s = lk.DaskScheduler(n_workers=2)\n"
    "flow = lk.ParallelFlow([SlowPCA(delay=0.5, output_dim=2)])\n"
    "chunks = [np.random.default_rng(i).normal(size=(50, 4)) for i in range(60)]",

    "run = flow.train([chunks], scheduler=s, wait=False)\n"
    "run",                                                  # shows the board

    "started = time.time()\n"
    "try:\n"
    "    run.result()\n"
    "    print('finished')\n"
    "except lk.CancelledError:\n"
    "    print(f'cancelled at {time.time():.3f}')\n"
    "print('untrained again:', flow[0].is_training() and flow[0].samples_seen == 0)",
]


@pytest.mark.timeout(300)
def test_cancel_stops_a_run_while_a_cell_waits_for_it(lab):
    with lab_for_a_test(lab) as (url, token, root_dir):
        write_notebook(root_dir, CELLS, NOTEBOOK)
        try:
            with chromium() as browser:
                page = browser.new_page(viewport={"width": 1400, "height": 1100})
                open_notebook(page, url, token, NOTEBOOK)
                run_all_cells(page)
                board = page.locator(".jp-OutputArea-output .labkit-board").first
                wait_for("the board", lambda: board.count() and board.is_visible(),
                         timeout=120, page=page)
                wait_for("some chunks done while the next cell waits",
                         lambda: any(re.search(r"— [1-9]\d*/60", t) for t in phase_labels(board)),
                         timeout=60, page=page, describe=lambda: phase_labels(board))
                assert cell_output_text(page, WAIT_CELL) == ""          # still waiting
                button = board.locator(".labkit-cancel button, button.labkit-cancel").first
                clicked = time.time()
                button.click()
                output = wait_for("the waiting cell to end", lambda: (
                    cell_output_text(page, WAIT_CELL) if "untrained again" in
                    cell_output_text(page, WAIT_CELL) else ""), timeout=30, page=page)
                screenshot(page, "jupyterlab-cancel")
                match = re.search(r"cancelled at ([\d.]+)", output)
                assert match, output
                assert float(match.group(1)) - clicked < 2.0, (float(match.group(1)), clicked)
                assert "untrained again: True" in output
                wait_for("the board to say cancelled", lambda: "cancelled" in board.inner_text(),
                         timeout=60, page=page, describe=lambda: board.inner_text()[:300])
                assert any("cancelled" in t and "failed" not in t for t in phase_labels(board))
        finally:
            shut_down_kernels(url, token)
        wait_for("the kernel and its Dask processes to exit", lambda: not kernel_processes(),
                 timeout=60, describe=kernel_processes)
