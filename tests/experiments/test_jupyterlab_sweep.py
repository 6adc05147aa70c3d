"""End to end: a sweep's live comparison board in a real JupyterLab, in headless Chromium.

The notebook starts an in-process ``DaskScheduler`` (two worker threads),
runs a sweep with ``wait=False`` (the ``Run`` is the cell's result, so the
cell shows the sweep's board) and then waits for the result in the next
cell, printing each trial's status.  The test sees the table, the curves and
the parallel coordinates grow while trials report, picks a running trial in
the board's trial menu and clicks "Stop trial"; the waiting cell then prints
that trial as ``stopped`` (the click reaches the kernel while the cell
blocks).  It checks the final table holds the result's numbers and that
nothing of the board is clipped at a 700-px output width.  At the end the
kernel is shut down; its processes must exit.
"""

from __future__ import annotations

import re
import time

import pytest

from tests.browser import chromium, screenshot
from tests.views.jupyterlab import NEEDS_BROWSER, jupyter_lab
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
TRIALS = 6
CELLS = [
    "import labkit as lk\n"
    "from tests.experiments import functions as F\n"
    "s = lk.DaskScheduler(mode='auto', n_workers=1, threads_per_worker=2)",

    "run = lk.sweep(F.slow_steps, {'x': lk.uniform(0, 1), 'width': lk.choice([8, 16]),\n"
    "                              'steps': 250},\n"
    f"               trials={TRIALS}, metric='loss', mode='min', scheduler=s, seed=0,\n"
    "               store=None, wait=False)\n"
    "run",                                                   # shows the sweep's board

    "result = run.result()\n"
    "for t in result.trials:\n"
    "    print(f'trial {t.id} {t.status} step={t.step!r} value={t.value!r} best={t.best!r}')\n"
    "print('sweep done')",
]

# Every element of the board that must not be clipped: its width fits its box.
CLIPPED_JS = """(board) => [...board.querySelectorAll('*')]
    .filter(e => !(e instanceof SVGElement && e.tagName !== 'svg'))   // an SVG scales whole
    .filter(e => e.clientWidth > 0 && e.scrollWidth > e.clientWidth + 1)
    .map(e => `${e.tagName}.${e.className.baseVal ?? e.className} in `
              + `${e.closest('[class*=labkit-sweep]')?.className}: `
              + `${e.scrollWidth}>${e.clientWidth}`
              + ` ${(e.textContent || '').slice(0, 40)}`)"""

# What reaches past the board's right edge.
OUTSIDE_JS = """(b) => { const right = b.getBoundingClientRect().right;
    return [...b.querySelectorAll('*')].filter(e => e.getBoundingClientRect().right > right + 1)
        .map(e => `${e.tagName}.${e.className.baseVal ?? e.className}`).slice(0, 10); }"""


def table_rows(board) -> list[dict]:
    """The board's table rows (their data attributes)."""
    return board.locator(".labkit-sweep-table tr[data-trial]").evaluate_all(
        "rows => rows.map(r => ({...r.dataset}))")


def frame(board) -> tuple:
    """What grows: reported steps in the table, curve points, parallel-coordinate lines."""
    steps = sum(int(r["step"]) for r in table_rows(board) if r["step"] != "None")
    points = board.locator(".labkit-sweep-curves polyline").evaluate_all(
        "lines => lines.reduce((n, l) => n + l.points.numberOfItems, 0)")
    lines = board.locator(".labkit-sweep-parallel polyline").evaluate_all(
        "lines => lines.filter(l => l.getAttribute('stroke') !== '#bbb').length")
    return steps, points, lines


@pytest.mark.timeout(300)
def test_sweep_board_live_in_jupyterlab_and_stop_a_trial():
    with jupyter_lab() as (url, token, root_dir):
        write_notebook(root_dir, CELLS, NOTEBOOK)
        try:
            with chromium() as browser:
                page = browser.new_page(viewport={"width": 1400, "height": 1400})
                open_notebook(page, url, token, NOTEBOOK)
                run_all_cells(page)
                board = page.locator(".jp-OutputArea-output .labkit-sweep-board").first
                wait_for("the sweep board", lambda: board.count() and board.is_visible(),
                         timeout=120, page=page)
                frames = []
                running = wait_for("a trial reporting", lambda: _grow(board, frames) and [
                    r for r in table_rows(board) if r["status"] == "running"
                    and r["step"] not in ("None", "0")], timeout=60, page=page,
                    describe=lambda: table_rows(board))
                victim = running[0]["trial"]
                board.locator(".labkit-sweep-trial select").select_option(
                    label=f"trial {victim}")
                board.locator(".labkit-sweep-stop button, button.labkit-sweep-stop").first.click()
                wait_for("the trial stopped on the board", lambda: _grow(board, frames) and any(
                    r["trial"] == victim and r["status"] == "stopped" for r in table_rows(board)),
                    timeout=30, page=page, describe=lambda: table_rows(board))
                screenshot(page, "jupyterlab-sweep-running")
                output = wait_for("the waiting cell to print the result", lambda: (
                    _grow(board, frames) and "sweep done" in cell_output_text(page, WAIT_CELL)
                    and cell_output_text(page, WAIT_CELL)), timeout=120, page=page)
                wait_for("the board's final frame", lambda: "finished" in board.locator(
                    ".labkit-sweep-status").inner_text(), timeout=20, page=page)
                screenshot(page, "jupyterlab-sweep-done")
                _check_final(page, board, output, victim, frames)
        finally:
            shut_down_kernels(url, token)
        wait_for("the kernel and its processes to exit", lambda: not kernel_processes(),
                 timeout=60, describe=kernel_processes)


def _grow(board, frames: list) -> bool:
    """Record the board's frame if it changed; always True (to chain in a wait)."""
    f = frame(board)
    if not frames or frames[-1] != f:
        frames.append(f)
    return True


def _check_final(page, board, output: str, victim: str, frames: list) -> None:
    """The kernel's result, the board's last frame and its layout."""
    kernel = {m[0]: m[1:] for m in re.findall(
        r"trial (\d+) (\w+) step=(\S+) value=(\S+) best=(\S+)", output)}
    assert len(kernel) == TRIALS, output
    assert kernel[victim][0] == "stopped", output
    assert int(kernel[victim][1]) < 249                      # stopped mid-way
    rows = {r["trial"]: r for r in table_rows(board)}
    for trial, (status, step, value, best) in kernel.items():
        row = rows[trial]
        assert (row["status"], row["step"], row["value"], row["best"]) == \
            (status, step, value, best), (row, kernel[trial])
    # grew while trials ran: several distinct frames, each holding more than the last
    assert len(frames) >= 3 and frames == sorted(frames), frames
    assert len({f[1] for f in frames}) >= 3 and len({f[2] for f in frames}) >= 2, frames
    for button in ("stop", "add"):
        assert board.locator(f".labkit-sweep-{button} button, button.labkit-sweep-{button}") \
            .first.is_disabled()
    # the layout at a 700-px output width: every label whole, tables with their headers
    board.evaluate("b => { b.style.width = '700px'; b.style.maxWidth = '700px'; }")
    time.sleep(0.5)
    assert board.evaluate(CLIPPED_JS) == []
    assert board.locator(".labkit-sweep-table th").count() >= 6
    assert board.evaluate("b => b.scrollWidth <= b.clientWidth"), board.evaluate(OUTSIDE_JS)
    widths = board.locator("svg").evaluate_all("s => s.map(e => e.getBoundingClientRect().width)")
    assert len(widths) == 2 and all(0 < w <= 700 for w in widths), widths
