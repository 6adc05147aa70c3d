"""End to end: a training's live board in a real JupyterLab, in headless Chromium.

The test writes a notebook that starts a 2-worker ``DaskScheduler``, trains a
slow PCA on 16 chunks with ``wait=False`` (the ``Run`` is the cell's result,
so the cell shows its board) and ends with a quick cell.  It opens the
notebook in JupyterLab, runs all cells from the Run menu and checks the DOM:
the board appears, its phase row reaches 100% while the kernel is idle, the
Bokeh plots drew canvases and the page's BokehJS document holds (no task
stream: the lanes draw the tasks, once) both workers' load and the node's row saying "trained" (the patches
reached the front-end),
and the task-lanes view drew a block per task (its ``data-spans``).
Screenshots go to ``test-artifacts/``.  At the end the kernel is shut down
through the REST API; its Dask processes must exit with it.
"""

from __future__ import annotations

import os
import re
import time

import nbformat
import pytest

from tests.browser import chromium, screenshot
from tests.views.jupyterlab import NEEDS_BROWSER, api, lab_for_a_test, shut_down_kernels

pytest.importorskip("playwright")
pytest.importorskip("jupyterlab")
pytest.importorskip("jupyter_bokeh")
pytest.importorskip("anywidget")
pytestmark = NEEDS_BROWSER

NOTEBOOK = "board.ipynb"
RUN_CELL = 2
N_CHUNKS = 16
CELLS = [
    "import numpy as np\n"
    "import labkit as lk\n"
    "from tests.helpers import SlowPCA\n"
    "s = lk.DaskScheduler(n_workers=2)",

    "rng = np.random.default_rng(0)\n"
    f"chunks = [rng.normal(size=(200, 6)) for _ in range({N_CHUNKS})]\n"
    "flow = lk.ParallelFlow([SlowPCA(delay=0.15, output_dim=3)])",

    "flow.train([chunks], scheduler=s, wait=False)",   # the Run is the result: its board shows

    "print('quick cell done')",
]


def write_notebook(root_dir: str, cells=CELLS, name: str = NOTEBOOK) -> str:
    """Write the notebook with a ``python3`` kernelspec (no Select Kernel dialog)."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)",
                                 "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    path = os.path.join(root_dir, name)
    nbformat.write(nb, path)
    return path


# -- waiting on the page --------------------------------------------------------------

def wait_for(what: str, check, timeout: float, page=None, interval: float = 0.25,
             describe=None):
    """Poll ``check()`` until it returns a truthy value; fail with ``what`` at the deadline.

    The failure says ``describe()`` (what was seen instead) when given, else the
    last value of ``check()``; with a ``page`` it also saves a screenshot.
    """
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        if page is not None:
            page.wait_for_timeout(interval * 1000)   # lets Playwright deliver events
        else:
            time.sleep(interval)
    if page is not None:
        screenshot(page, f"jupyterlab-timeout-{re.sub(r'[^a-z0-9]+', '-', what.lower())}")
    seen = describe() if describe is not None else last
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (saw: {seen!r})")


def kernel_idle(url: str, token: str, name: str) -> bool:
    """Whether the server has a session for notebook ``name`` with an idle kernel."""
    sessions = api(url, token, "/api/sessions")
    return any(s.get("path", "").endswith(name) and s.get("kernel")
               and s["kernel"].get("execution_state") == "idle" for s in sessions)


def open_notebook(page, url: str, token: str, name: str = NOTEBOOK) -> None:
    """Open the notebook and wait until its kernel is started and idle, as the page sees it."""
    page.goto(f"{url}/lab/tree/{name}?token={token}")
    page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-Cell", timeout=90_000)
    wait_for("the kernel to start", lambda: kernel_idle(url, token, name), timeout=90, page=page)
    status = page.locator(".jp-StatusBar-Widget", has_text=re.compile(r"\|\s*Idle"))
    wait_for("the status bar to show the idle kernel", lambda: status.count() > 0,
             timeout=60, page=page)


def accept_kernel_dialog(page) -> bool:
    """Press "Select" if JupyterLab asks which kernel to use (it should not)."""
    dialog = page.locator(".jp-Dialog", has_text="Select Kernel")
    if not dialog.count():
        return False
    dialog.locator(".jp-Dialog-button.jp-mod-accept").click()
    return True


def run_all_cells(page) -> None:
    """Run menu -> Run All Cells."""
    accept_kernel_dialog(page)
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()


def cell_output_text(page, index: int) -> str:
    outputs = page.locator(".jp-Notebook .jp-Cell").nth(index).locator(".jp-OutputArea")
    return outputs.inner_text() if outputs.count() else ""


def phase_labels(board) -> list[str]:
    rows = board.locator(".labkit-phase")
    return [rows.nth(i).inner_text() for i in range(rows.count())]


def lanes_spans(board) -> int:
    lanes = board.locator(".labkit-lanes")
    if not lanes.count():
        return -1
    value = lanes.first.get_attribute("data-spans")
    return int(value) if value and value.isdigit() else -1


def bokeh_canvases(board) -> int:
    """Canvas elements drawn by Bokeh inside the board (CSS locators pierce shadow roots)."""
    return board.locator(".labkit-bokeh canvas").count() or board.locator("canvas").count()


BOKEH_ROWS = """() => {
  // Rows of the board's Bokeh sources as BokehJS holds them in the page.
  const B = window.Bokeh;
  if (!B || !B.documents) return null;
  const rows = (source) => {
    const data = source && source.data;
    const cols = data instanceof Map ? [...data.values()] : Object.values(data || {});
    return cols.length ? cols[0].length : 0;
  };
  const out = {spans: 0, devices: 0, nodes: 0, trained: 0};
  for (const doc of B.documents) {
    for (const m of doc.all_models) {
      if (m.name === "labkit-task-stream-spans") out.spans += rows(m.data_source);
      if (m.name === "labkit-device-load-source") out.devices += rows(m);
      if (m.name === "labkit-node-table") {
        out.nodes += (m.text.match(/labkit-node-row/g) || []).length;
        out.trained += (m.text.match(/>trained</g) || []).length;
      }
    }
  }
  return out;
}"""


def bokeh_rows(page) -> dict | None:
    """Rows of the task-stream spans, device-load and node sources in the page's BokehJS,
    and how many node rows say ``trained``."""
    return page.evaluate(BOKEH_ROWS)


# -- processes --------------------------------------------------------------------------

def kernel_processes() -> list[str]:
    """The processes that JupyterLab servers started by this test process still run.

    Those are the kernels and the Dask processes of their schedulers.
    """
    import psutil
    found = []
    for server in psutil.Process().children():
        try:
            if "jupyter" not in " ".join(server.cmdline()):
                continue
            for proc in server.children(recursive=True):
                if proc.status() != psutil.STATUS_ZOMBIE:
                    found.append(f"{proc.pid}: {' '.join(proc.cmdline())[:150]}")
        except psutil.NoSuchProcess:
            pass
    return found


# -- the test ---------------------------------------------------------------------------

@pytest.mark.timeout(300)
def test_board_live_in_jupyterlab(lab):
    console: list[str] = []
    with lab_for_a_test(lab) as (url, token, root_dir):
        write_notebook(root_dir)
        try:
            with chromium() as browser:
                page = browser.new_page(viewport={"width": 1400, "height": 1100})
                page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
                page.on("pageerror", lambda e: console.append(f"pageerror: {e}"))
                try:
                    check_board(page, url, token)
                except AssertionError as err:
                    errors = [m for m in console if m.startswith(("error", "pageerror"))]
                    raise AssertionError(f"{err}\nbrowser console errors: {errors[:10]}") from None
        finally:
            ids = shut_down_kernels(url, token)
        assert ids, "no kernel was running"
        wait_for("the kernel and its Dask processes to exit", lambda: not kernel_processes(),
                 timeout=60, describe=kernel_processes)


def check_board(page, url: str, token: str) -> None:
    """Run the notebook; check the board's rows, Bokeh plots and lanes in the page."""
    open_notebook(page, url, token)
    run_all_cells(page)
    board = wait_for_board(page)
    screenshot(page, "jupyterlab-board-midway")

    wait_for("the phase row to reach 100%",
             lambda: any("100%" in label for label in phase_labels(board)), timeout=120,
             page=page, describe=lambda: phase_labels(board))
    wait_for("the quick last cell's output",
             lambda: "quick cell done" in cell_output_text(page, len(CELLS) - 1),
             timeout=60, page=page)
    labels = phase_labels(board)
    assert any(f"{N_CHUNKS}/{N_CHUNKS}" in label and "PCA" in label for label in labels), labels
    problems = [p for p in (check_bokeh(page, board), check_lanes(page, board)) if p]
    errors = board.locator(".labkit-errors-title")
    if errors.count():
        problems.append(f"the board shows errors: {board.locator('.labkit-errors').inner_text()}")
    board.scroll_into_view_if_needed()
    screenshot(page, "jupyterlab-board-final")
    assert not problems, "\n".join(problems)


def wait_for_board(page):
    """The board in the Run cell's output (fails fast if the Run shows its plain repr)."""
    boards = page.locator(".jp-OutputArea-output .labkit-board")

    def shown():
        accept_kernel_dialog(page)
        if boards.count():
            return True
        text = cell_output_text(page, RUN_CELL)
        assert "<labkit Run" not in text or "quick cell done" not in cell_output_text(
            page, len(CELLS) - 1), f"the Run showed its plain repr, not its board: {text!r}"
        return False

    wait_for("the board", shown, timeout=120, page=page)
    board = boards.first
    board.scroll_into_view_if_needed()
    return board


def check_bokeh(page, board) -> str | None:
    """The Bokeh plots drew canvases and got the load and node rows; a problem or None."""
    def drawn():
        rows = bokeh_rows(page)
        return bool(rows) and rows["spans"] == 0 and rows["devices"] >= 2 \
            and rows["nodes"] >= 1 and rows["trained"] >= 1 and bokeh_canvases(board) > 0

    def seen():
        return dict(bokeh_rows(page) or {}, canvases=bokeh_canvases(board))

    try:
        wait_for("Bokeh canvases, and BokehJS in the page holding no task stream (the lanes draw "
                 "the tasks), "
                 "2 workers' load and the node's row saying 'trained'", drawn, timeout=30,
                 page=page, describe=seen)
    except AssertionError as err:
        return str(err)
    return None


def check_lanes(page, board) -> str | None:
    """The lanes view drew a block per task; a problem or None."""
    try:
        wait_for(f"the lanes view to draw {N_CHUNKS} task blocks (data-spans)",
                 lambda: lanes_spans(board) >= N_CHUNKS, timeout=30, page=page,
                 describe=lambda: lanes_spans(board))
    except AssertionError as err:
        return str(err)
    return None
