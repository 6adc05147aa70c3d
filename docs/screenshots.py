"""Regenerate the README's screenshots of the live board, notebooks 01–04 in JupyterLab.

Run from the repository root with the test environment (``make test`` makes it)::

    .venv/bin/python docs/screenshots.py            # all four
    .venv/bin/python docs/screenshots.py 02 04      # some of them

Each notebook is copied into a throw-away JupyterLab (the test suite's harness,
``tests/views/jupyterlab.py``), run from the Run menu in headless Chromium, and
its first board is captured twice: while the run is under way
(``docs/images/board-NN-live.png``) and once every cell has run
(``docs/images/board-NN.png``).  The kernel is shut down and the server and
its processes are ended by their ids at the end, as in the tests.
"""

from __future__ import annotations

import os
import shutil
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tests.browser import chromium  # noqa: E402  (the repository root first)
from tests.views.jupyterlab import jupyter_lab  # noqa: E402
from tests.views.test_jupyterlab import (open_notebook, run_all_cells,  # noqa: E402
                                         shut_down_kernels)

NOTEBOOKS = {"01": "01-parallel-flows.ipynb", "02": "02-data-parallel-torch.ipynb",
             "03": "03-pipelines-and-programs.ipynb", "04": "04-ensembles.ipynb"}
OUT = os.path.join(ROOT, "docs", "images")
PROMPTS = """() => [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputPrompt')]
  .map((e) => e.textContent.trim())"""


def all_ran(page) -> bool:
    """Every code cell shows an execution count, none a star."""
    prompts = page.evaluate(PROMPTS)
    return bool(prompts) and all(p.startswith("[") and p[1:-2].isdigit() for p in prompts)


def capture(page, key: str, timeout: float = 240) -> list[str]:
    """Run the open notebook; shoot its first board live and at the end; the files."""
    run_all_cells(page)
    board = page.locator(".jp-OutputArea-output .labkit-board").first
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not board.count():
        page.wait_for_timeout(100)
    files = []
    if board.count():
        page.wait_for_timeout(600)              # a few redraws into the run
        board.scroll_into_view_if_needed()
        files.append(os.path.join(OUT, f"board-{key}-live.png"))
        board.screenshot(path=files[-1])
    while time.monotonic() < deadline and not all_ran(page):
        page.wait_for_timeout(250)
    if board.count():
        page.wait_for_timeout(1500)             # the final draw
        board.scroll_into_view_if_needed()
        files.append(os.path.join(OUT, f"board-{key}.png"))
        board.screenshot(path=files[-1])
    return files


def main(keys) -> int:
    os.makedirs(OUT, exist_ok=True)
    for key in keys:
        name = NOTEBOOKS[key]
        with jupyter_lab() as (url, token, root_dir):
            shutil.copy(os.path.join(ROOT, "notebooks", name), os.path.join(root_dir, name))
            try:
                with chromium() as browser:
                    page = browser.new_page(viewport={"width": 1300, "height": 1000})
                    open_notebook(page, url, token, name)
                    for path in capture(page, key):
                        print(f"screenshots: {os.path.relpath(path, ROOT)}", flush=True)
            finally:
                shut_down_kernels(url, token)
    return 0


if __name__ == "__main__":
    wanted = sys.argv[1:] or list(NOTEBOOKS)
    unknown = [k for k in wanted if k not in NOTEBOOKS]
    if unknown:
        sys.exit(f"screenshots: unknown notebook(s) {unknown}; choose from {list(NOTEBOOKS)}")
    sys.exit(main(wanted))
