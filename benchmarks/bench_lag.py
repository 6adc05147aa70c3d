"""How far the boards trail the engine, in a real JupyterLab in headless Chromium.

Runs the browser tests of notebooks 01–04 (``tests/notebooks/test_jupyterlab_01.py``
and ``test_jupyterlab_notebooks.py``), whose pages record every frame a board
drew: the hidden clock stamp of its status line (oldest new event, draw start,
draw end) and when the page showed it.  Each test writes its summary to
``test-artifacts/lag-NN.json``; this prints them as one table:

* ``page``: event -> page (the lag a user sees), median and 90th percentile;
* ``kernel``: event -> start of the draw (the view's pacing and wake-up);
* ``draw``: the draw itself (the writer thread, at niceness 10);
* ``wire``: end of the draw -> page (IOPub, the Jupyter server, the browser).

Usage::

    .venv/bin/python benchmarks/bench_lag.py
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARTIFACTS = os.path.join(ROOT, "test-artifacts")
TESTS = ["tests/notebooks/test_jupyterlab_01.py", "tests/notebooks/test_jupyterlab_notebooks.py"]


def main() -> int:
    """Run the browser tests, then print the lag of each notebook's board."""
    for name in os.listdir(ARTIFACTS) if os.path.isdir(ARTIFACTS) else []:
        if name.startswith("lag-"):
            os.remove(os.path.join(ARTIFACTS, name))
    start = time.time()
    rc = subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          *TESTS], cwd=ROOT)
    print(f"\nlabkit board lag in JupyterLab (headless Chromium): benchmarks/bench_lag.py")
    print(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
          f"· {os.cpu_count()} cores, {platform.system()} · tests took {time.time() - start:.0f} s"
          f" (exit {rc})")
    print(f"{'notebook':>8} {'frames':>6} {'page median':>11} {'p90':>6} {'kernel':>7} "
          f"{'draw':>6} {'wire':>6}")
    for nb in ("01", "02", "03", "04"):
        path = os.path.join(ARTIFACTS, f"lag-{nb}.json")
        if not os.path.exists(path):
            print(f"{nb:>8}  (no figures: its test did not get that far)")
            continue
        with open(path) as f:
            r = json.load(f)
        cell = lambda k: "-" if r.get(k) is None else f"{r[k]:.2f}"   # noqa: E731
        print(f"{nb:>8} {r['frames']:>6} {cell('median_s'):>11} {cell('p90_s'):>6} "
              f"{cell('kernel_median_s'):>7} {cell('draw_median_s'):>6} "
              f"{cell('wire_median_s'):>6}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
