"""A 10,000-trial sweep on its board in a real JupyterLab: how far the page trails, a sort.

The notebook runs 10,000 cheap trials (up to nine reports, each after 1.5 ms
of work that lets the GIL go; ASHA) on the embedded default cluster with
``wait=False``, shows the sweep's board and waits in ``run.result()``.  While
it runs, the page records every frame the board drew (the hidden clock
stamp of its status line, :mod:`tests.notebooks.live`): the lag from each
event to the page is written, median and 90th percentile, to
``test-artifacts/lag-sweep-10k.json`` (the goal is within 1 s; the test
asserts only :data:`~tests.notebooks.live.LAG_BOUND` of the median).
Then:

* the board's last frame holds what the kernel printed: 10,000 trials, the
  counts by status, the best trial (highlighted in the table), the status
  ``finished``; the table holds 10,000 rows of which only those in view are
  in the DOM;
* a click on the ``latest`` header sorts the 10,000 rows (the rows in view
  rise in value, the best first), again reverses them; the time the page
  measures for each (``data-sort-ms``: the sort and the rows drawn) and the
  time from the click to the next frame painted go to the same file (goal
  0.2 s; asserted loosely, :data:`SORT_BOUND`).

At the end the kernel is shut down; its processes must exit.
"""

from __future__ import annotations

import ast
import json
import os
import re

import pytest

from tests.browser import ARTIFACTS, chromium, screenshot
from tests.notebooks import live
from tests.views.jupyterlab import NEEDS_BROWSER, lab_for_a_test
from tests.views.test_jupyterlab import (
    cell_output_text,
    kernel_processes,
    open_notebook,
    run_all_cells,
    shut_down_kernels,
    wait_for,
    write_notebook,
)

pytest.importorskip("playwright")
pytest.importorskip("jupyterlab")
pytestmark = NEEDS_BROWSER

NOTEBOOK = "sweep10k.ipynb"
WAIT_CELL = 2
TRIALS = 10_000
#: What the test asserts of a sort (s): the figure itself (0.2 s the goal) is recorded.
SORT_BOUND = 2.0
CELLS = [
    "import math, time\n"
    "import labkit as lk\n"
    "s = lk.DaskScheduler()\n"
    "def quick(config, trial):\n"
    "    speed = 0.6 / (1 + math.log10(config['lr'] / 3e-3) ** 2)\n"
    "    floor = 0.05 + 0.3 * config['dropout'] + {'adam': 0, 'sgd': 0.08, 'rmsprop': 0.04}["
    "config['optimizer']]\n"
    "    for epoch in range(1, 10):\n"
    "        time.sleep(0.0015)\n"
    "        trial.report(epoch, loss=floor + (1 - floor) * math.exp(-speed * epoch))",

    "run = lk.sweep(quick, {'lr': lk.loguniform(1e-5, 1), 'dropout': lk.uniform(0, 0.5),\n"
    "                       'optimizer': lk.choice(['adam', 'sgd', 'rmsprop'])},\n"
    f"               trials={TRIALS}, metric='loss', mode='min', scheduler=s, seed=0,\n"
    "               store=None, name='quick-10k', early_stop=lk.ASHA(min_steps=1, reduction=3),\n"
    "               wait=False)\n"
    "run",

    "began = time.perf_counter()\n"
    "result = run.result()\n"
    "print(f'sweep done in {time.perf_counter() - began:.1f} s: {len(result.trials)} trials, '\n"
    "      f'counts {result.counts()}, best {result.best.id}')\n"
    "s.shutdown()",
]

#: JS: the trial ids and ``latest`` cells of the table's rows in the DOM, top to bottom.
ROWS = """(board) => {
  const keys = [...board.querySelectorAll('.labkit-sweep-table th[data-key]')]
    .map((th) => th.dataset.key);
  const at = keys.indexOf('latest');
  return [...board.querySelectorAll('.labkit-sweep-table tr[data-trial]')]
    .map((tr) => [+tr.dataset.trial, tr.children[at].textContent,
                  tr.classList.contains('labkit-sweep-best')]);
}"""

#: JS: click a header; the page's own sort time and the time to the next painted frame (ms).
SORT = """async (board, key) => {
  const th = board.querySelector(`.labkit-sweep-table th[data-key="${key}"]`);
  const t0 = performance.now();
  th.click();
  await new Promise((done) => requestAnimationFrame(() => setTimeout(done, 0)));
  return {page_ms: +board.dataset.sortMs, painted_ms: performance.now() - t0};
}"""


@pytest.mark.timeout(400)
def test_a_10000_trial_sweep_board_keeps_up_and_sorts_in_jupyterlab(lab):
    with lab_for_a_test(lab) as (url, token, root_dir):
        write_notebook(root_dir, CELLS, NOTEBOOK)
        try:
            with chromium() as browser:
                page = browser.new_page(viewport={"width": 1400, "height": 1200})
                errors: list[str] = []
                page.on("pageerror", lambda e: errors.append(str(e)))
                open_notebook(page, url, token, NOTEBOOK)
                live.watch(page)
                run_all_cells(page)
                board = page.locator(".jp-OutputArea-output .labkit-sweep-board").first
                output = wait_for("the sweep's end, printed", lambda: (
                    "sweep done" in cell_output_text(page, WAIT_CELL)
                    and cell_output_text(page, WAIT_CELL)), timeout=300, page=page)
                kernel = re.search(r"(\d+) trials, counts (\{[^}]*\}), best (\d+)", output)
                assert kernel and int(kernel.group(1)) == TRIALS, output
                wait_for("the board's last frame", lambda: board.get_attribute("data-ended")
                         == "1", timeout=60, page=page)
                screenshot(page, "jupyterlab-sweep-10k")
                check_last_frame(board, ast.literal_eval(kernel.group(2)), int(kernel.group(3)))
                lags = live.lags(page)
                summary = live.record_lags("sweep-10k", lags, kernel=live.lags(page, "kernel"),
                                           draw=live.lags(page, "draw"),
                                           wire=live.lags(page, "wire"))
                sorts = check_sorting(board, int(kernel.group(3)))
                record(summary, sorts, output)
                assert len(lags) >= 10 and summary["median_s"] <= live.LAG_BOUND, summary
                assert max(s["painted_ms"] for s in sorts) <= SORT_BOUND * 1000, sorts
                assert not errors, errors[:5]
        finally:
            shut_down_kernels(url, token)
        wait_for("the kernel and its processes to exit", lambda: not kernel_processes(),
                 timeout=60, describe=kernel_processes)


def check_last_frame(board, counts: dict, best: int) -> None:
    """The status line says what the kernel printed; the table holds 10,000 rows, a few in
    the DOM, the best one highlighted."""
    status = board.locator(".labkit-sweep-status").inner_text()
    assert f"finished · {TRIALS} trials" in status, status
    for word, n in counts.items():
        assert f"{n} {word}" in status, (status, counts)
    assert f"best: trial {best}," in status, status
    assert board.get_attribute("data-rows") == str(TRIALS)
    rows = board.evaluate(ROWS)
    assert 5 <= len(rows) <= 100, len(rows)                         # virtualized
    curves = board.locator(".labkit-sweep-curves")
    assert curves.get_attribute("data-band") == str(TRIALS - 10)     # all but the best ten
    assert curves.get_attribute("data-lines") == "10"


def check_sorting(board, best: int) -> list[dict]:
    """A click on ``latest`` sorts the rows by it (the best first, a min sweep's), a second
    click reverses them; the times of each."""
    sorts = []
    for rising in (True, False):
        sorts.append(board.evaluate(SORT, "latest"))
        rows = board.evaluate(ROWS)
        values = [float(v) for _, v, _ in rows if v != "–"]
        assert values and values == sorted(values, reverse=not rising), rows[:20]
        if rising:
            assert rows[0][0] == best and rows[0][2], rows[:3]        # the best, highlighted
    return sorts


def record(summary: dict, sorts: list[dict], output: str) -> None:
    """Add the sorts and the sweep's time to ``lag-sweep-10k.json``."""
    summary["sort_ms"] = [round(s["page_ms"], 1) for s in sorts]
    summary["sort_painted_ms"] = [round(s["painted_ms"], 1) for s in sorts]
    summary["sweep_s"] = float(re.search(r"sweep done in ([0-9.]+) s", output).group(1))
    with open(os.path.join(ARTIFACTS, "lag-sweep-10k.json"), "w") as f:
        json.dump(summary, f, indent=1)
