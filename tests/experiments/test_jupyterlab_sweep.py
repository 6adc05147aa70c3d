"""End to end: a sweep's board in a real JupyterLab, its controls answered while a cell waits.

The notebook starts an in-process ``DaskScheduler`` (four worker threads),
runs a sweep of slow trials with ``wait=False`` (the ``Run`` is the cell's
result, so the cell shows the sweep's board) and then waits in the next cell
in ``run.result()``: the kernel's main thread is busy until the sweep ends.
Meanwhile the test, in headless Chromium, uses the board as a user would; the
board's messages go to labkit's kernel subshell (``serve_while_busy``), so
every answer comes while the cell still waits (its prompt shows ``[*]``):

* the table and curves grow while trials report (the page's frame ``seq``
  and the points the curves canvas drew, both rising); the worker is named
  as the dashboard names it (``worker 0 (this process, 4 threads)``);
* a click on a running trial's row shows its history (its reports);
* a drag on the ``x`` axis of the parallel coordinates brushes it: the table
  holds the brushed trials only, the curves are the kernel's answer for them
  (a line each), and "stop these" stops exactly the running trials among
  them; a click on the axis clears the brush;
* "add trials" adds two, and Cancel cancels the sweep.

The waiting cell then prints each trial's status as the store kept it: the
brushed trials ``stopped`` (and no other), the two added ones there.  The
board's last table holds those statuses and steps, its controls are
disabled, and nothing of it is clipped at a 700-px output width.  Saved (with
JupyterLab saving the widgets' state), its kernel shut down and opened again,
the notebook shows the board's last frame, the same table, from the saved
state.  At the end the kernel is shut down; its processes must exit.
"""

from __future__ import annotations

import json
import os
import re

import pytest

from tests.browser import chromium, screenshot
from tests.notebooks import live
from tests.views.jupyterlab import NEEDS_BROWSER, lab_for_a_test, save_widget_state
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

NOTEBOOK = "sweep.ipynb"
WAIT_CELL = 2
TRIALS, ADDED = 8, 2
CELLS = [
    "import labkit as lk\n"
    "from tests.experiments import functions as F\n"
    "s = lk.DaskScheduler(mode='auto', n_workers=1, threads_per_worker=4)",

    # 1500 steps of 10 ms: a trial runs for 15 s, long enough to be caught running
    "run = lk.sweep(F.slow_steps, {'x': lk.uniform(0, 1), 'width': lk.choice([8, 16]),\n"
    "                              'steps': 1500},\n"
    f"               trials={TRIALS}, metric='loss', mode='min', scheduler=s, seed=0,\n"
    "               store='sweep.db', name='board', wait=False)\n"
    "run",                                                   # shows the sweep's board

    "try:\n"
    "    run.result()\n"
    "    print('sweep finished')\n"
    "except lk.CancelledError:\n"
    "    print('sweep cancelled')\n"
    "for t in lk.load_sweep('sweep.db', 'board').trials:\n"
    "    print(f'trial {t.id} {t.status} step={t.step!r}')\n"
    "print('sweep done')\n"
    "s.shutdown()",
]

#: JS: the table's rows in the DOM (virtualized: those in view), each cell by its column key.
ROWS = """(board) => {
  const keys = [...board.querySelectorAll('.labkit-sweep-table th[data-key]')]
    .map((th) => th.dataset.key);
  return [...board.querySelectorAll('.labkit-sweep-table tr[data-trial]')].map((tr) => {
    const cells = {};
    [...tr.children].forEach((td, k) => { cells[keys[k]] = td.textContent; });
    return {trial: +tr.dataset.trial, status: tr.dataset.status, cells};
  });
}"""

#: JS: what a frame left on the page that only grows while trials report.
GROWTH = """(board) => [+board.dataset.seq || 0,
  +(board.querySelector('.labkit-sweep-curves').dataset.points || 0)]"""


def rows(board) -> list[dict]:
    return board.evaluate(ROWS)


def running(board) -> list[dict]:
    """The running trials that reported a step."""
    return [r for r in rows(board) if r["status"] == "running"
            and r["cells"]["step"] not in ("–", "0")]


def message(board) -> str:
    return board.locator(".labkit-sweep-message").inner_text()


def waiting(page) -> bool:
    """Whether the waiting cell still runs (its prompt shows a star)."""
    prompt = page.locator(".jp-Notebook .jp-CodeCell").nth(WAIT_CELL).locator(".jp-InputPrompt")
    return "*" in prompt.inner_text()


def answered(page, board, what: str, pattern: str) -> str:
    """The message area's line matching ``pattern``; the cell must still wait when it shows."""
    line = wait_for(what, lambda: re.search(pattern, message(board)), timeout=20, page=page,
                    describe=lambda: message(board))
    assert waiting(page), f"{what}: the answer came after the cell ended"
    return line.group(0)


@pytest.mark.timeout(300)
def test_the_sweep_board_answers_while_a_cell_waits_in_jupyterlab(lab):
    console: list[str] = []
    with lab_for_a_test(lab) as (url, token, root_dir):
        write_notebook(root_dir, CELLS, NOTEBOOK)
        save_widget_state(root_dir)
        try:
            with chromium() as browser:
                page = browser.new_page(viewport={"width": 1400, "height": 1400})
                page.on("pageerror", lambda e: console.append(f"pageerror: {e}"))
                open_notebook(page, url, token, NOTEBOOK)
                run_all_cells(page)
                board = page.locator(".jp-OutputArea-output .labkit-sweep-board").first
                wait_for("the sweep board", lambda: board.count() and board.is_visible(),
                         timeout=120, page=page)
                grown = [board.evaluate(GROWTH)]
                wait_for("three trials reporting, and the board growing", lambda: (
                    grown.append(board.evaluate(GROWTH)) or len(running(board)) >= 3
                    and len({g[1] for g in grown}) >= 3), timeout=90, page=page,
                    describe=lambda: (rows(board), grown[-3:]))
                assert waiting(page)
                assert grown == sorted(grown), grown      # seq and points only rose
                names = board.locator(".labkit-sweep-worker-name")
                assert names.all_inner_texts() == ["worker 0"], names.all_inner_texts()
                assert names.first.get_attribute("title") == "worker 0 (this process, 4 threads)"
                show_history(page, board)
                stopped = stop_brushed(page, board)
                add_and_cancel(page, board)
                output = wait_for("the waiting cell to print the trials", lambda: (
                    "sweep done" in cell_output_text(page, WAIT_CELL)
                    and cell_output_text(page, WAIT_CELL)), timeout=60, page=page)
                wait_for("the board's last frame", lambda: board.get_attribute("data-ended")
                         == "1", timeout=30, page=page)
                screenshot(page, "jupyterlab-sweep-done")
                check_final(page, board, output, stopped)
                reopen_saved(page, url, token, root_dir, rows(board))
                assert not console, console[:5]
        finally:
            shut_down_kernels(url, token)
        wait_for("the kernel and its processes to exit", lambda: not kernel_processes(),
                 timeout=60, describe=kernel_processes)


def show_history(page, board) -> None:
    """A click on a running trial's row: its reports shown under the table."""
    trial = running(board)[0]["trial"]
    board.locator(f".labkit-sweep-table tr[data-trial='{trial}']").click()
    detail = board.locator(".labkit-sweep-detail")
    wait_for("the trial's history", lambda: re.search(
        rf"trial {trial} · running .*\bstep\s+loss\b", detail.inner_text(), re.S),
        timeout=20, page=page, describe=lambda: detail.inner_text()[:300])
    assert waiting(page)
    steps = detail.locator("tbody tr").count()
    assert steps >= 1, detail.inner_html()[:500]
    detail.locator(".labkit-sweep-detail-close").click()


def stop_brushed(page, board) -> set[int]:
    """Brush the ``x`` axis over the two running trials of lowest ``x`` (not the others);
    "stop these" stops exactly those.  Returns them."""
    every = rows(board)
    xs = {r["trial"]: float(r["cells"]["param:x"]) for r in every}
    lo, hi = min(xs.values()), max(xs.values())
    live_ones = sorted(running(board), key=lambda r: xs[r["trial"]])
    assert len(live_ones) >= 3, live_ones
    chosen = {r["trial"] for r in live_ones[:2]}
    canvas = board.locator(".labkit-sweep-parallel")
    canvas.scroll_into_view_if_needed()
    axes = {a["name"]: a["x"] for a in json.loads(canvas.get_attribute("data-axes"))}
    plot = json.loads(canvas.get_attribute("data-plot"))
    box = canvas.bounding_box()

    def y(v):                       # the axis's pixel for x = v (its ends: the lowest, highest)
        return box["y"] + plot["top"] + (1 - (v - lo) / (hi - lo)) * (plot["bottom"] - plot["top"])

    low = xs[live_ones[0]["trial"]]
    between = (xs[live_ones[1]["trial"]] + xs[live_ones[2]["trial"]]) / 2
    page.mouse.move(box["x"] + axes["x"], y(low) + 3)
    page.mouse.down()
    page.mouse.move(box["x"] + axes["x"], y(between), steps=6)
    page.mouse.up()
    button = board.locator(".labkit-sweep-stop-brushed")
    wait_for("the table brushed to the chosen trials", lambda: {
        r["trial"] for r in rows(board) if r["status"] == "running"} == chosen
        and button.is_enabled(), timeout=10, page=page, describe=lambda: rows(board))
    assert button.inner_text() == "stop these (2)", button.inner_text()
    assert all(lo <= xs[r["trial"]] <= between for r in rows(board)), rows(board)
    assert int(board.get_attribute("data-rows")) < len(every)
    # the curves of the brushed trials, as the kernel answered the brush: a line each of
    # those that reported (the pending ones have none)
    curves = board.locator(".labkit-sweep-curves")
    reported = {r["trial"] for r in rows(board) if r["cells"]["step"] != "–"}
    wait_for("the kernel's curves of the brush", lambda: curves.get_attribute("data-brush")
             and curves.get_attribute("data-lines") == str(len(reported)), timeout=10,
             page=page, describe=lambda: (curves.get_attribute("data-brush"),
                                          curves.get_attribute("data-lines"), reported))
    button.click()
    said = answered(page, board, "the stop's answer", r"trials (\d+), (\d+): stop requested")
    assert {int(t) for t in re.findall(r"\d+", said)} == chosen, said
    wait_for("the stopped trials on the board", lambda: {
        r["trial"] for r in rows(board) if r["status"] == "stopped"} == chosen, timeout=20,
        page=page, describe=lambda: rows(board))
    page.mouse.click(box["x"] + axes["x"], y(low) + 3)          # a click clears the brush
    wait_for("the brush cleared", lambda: board.get_attribute("data-rows") == str(len(every)),
             timeout=10, page=page, describe=lambda: board.get_attribute("data-rows"))
    return chosen


def add_and_cancel(page, board) -> None:
    """Two trials added, then the sweep cancelled, each answered while the cell waits."""
    board.locator(".labkit-sweep-add-n").fill(str(ADDED))
    board.locator(".labkit-sweep-add").click()
    answered(page, board, "the add's answer", rf"added trials {TRIALS}–{TRIALS + ADDED - 1}")
    wait_for("the added trials in the status line", lambda: f"{TRIALS + ADDED} trials" in
             board.locator(".labkit-sweep-status").inner_text(), timeout=20, page=page)
    board.locator(".labkit-cancel").click()
    wait_for("the cancel's answer", lambda: "cancelling the sweep" in message(board),
             timeout=20, page=page, describe=lambda: message(board))


def check_final(page, board, output: str, stopped: set[int]) -> None:
    """The store's statuses (as the cell printed them), the board's last table, its layout."""
    assert "sweep cancelled" in output, output
    kernel = {int(m[0]): (m[1], m[2]) for m in re.findall(r"trial (\d+) (\w+) step=(\S+)",
                                                          output)}
    assert sorted(kernel) == list(range(TRIALS + ADDED)), output
    assert {t for t, (status, _) in kernel.items() if status == "stopped"} == stopped, output
    assert all(int(kernel[t][1]) < 1499 for t in stopped), output          # stopped mid-way
    assert "cancelled" in board.locator(".labkit-sweep-status").inner_text()
    shown = {r["trial"]: r for r in rows(board)}
    assert sorted(shown) == sorted(kernel), shown
    for trial, (status, step) in kernel.items():
        cells = shown[trial]["cells"]
        assert (shown[trial]["status"], cells["step"]) == \
            (status, "–" if step == "None" else step), (trial, shown[trial], kernel[trial])
    for control in (".labkit-cancel", ".labkit-sweep-stop-brushed", ".labkit-sweep-add"):
        assert board.locator(control).is_disabled(), control
    live.narrow_outputs(page)
    wait_for("the board at 700 px", lambda: abs(board.bounding_box()["width"] - live.OUTPUT_WIDTH)
             < 2, timeout=10, page=page, describe=lambda: board.bounding_box())
    assert live.clipped(page) == []
    assert board.locator(".labkit-sweep-table th").count() == 7 + 2     # fixed columns, params


def reopen_saved(page, url: str, token: str, root_dir: str, final: list[dict]) -> None:
    """Save the notebook, shut its kernel down, open it again: the board shows its last
    frame from the saved widget state (the kept frame; the new kernel knows no sweep)."""
    page.locator(".jp-Notebook .jp-Cell").first.click()
    page.keyboard.press("Control+s")

    def kept() -> bool:
        with open(os.path.join(root_dir, NOTEBOOK)) as f:
            saved = json.load(f)["metadata"].get("widgets", {})
        states = saved.get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
        return any(m["state"].get("last", {}).get("ended") for m in states.values())

    wait_for("the notebook saved with the board's last frame", kept, timeout=20, page=page)
    shut_down_kernels(url, token)
    open_notebook(page, url, token, NOTEBOOK)
    board = page.locator(".jp-OutputArea-output .labkit-sweep-board").first
    wait_for("the saved board", lambda: board.count() and board.get_attribute("data-kept") == "1",
             timeout=30, page=page)
    screenshot(page, "jupyterlab-sweep-reopened")
    assert "cancelled" in board.locator(".labkit-sweep-status").inner_text()
    assert rows(board) == final
