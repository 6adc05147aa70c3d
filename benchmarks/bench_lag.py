"""How far the boards trail the engine, in a real JupyterLab in headless Chromium.

Runs the browser tests of notebooks 01–04 and 06 (``tests/notebooks/test_jupyterlab_01.py``
and ``test_jupyterlab_notebooks.py``) and of a 10,000-trial sweep
(``tests/experiments/test_jupyterlab_sweep_10k.py``), whose pages record every frame a
board drew: the hidden clock stamp of its status line (oldest new event, draw start,
draw end) and when the page showed it.  Each test writes its summary to
``test-artifacts/lag-NN.json`` (``lag-sweep-10k.json``, with the time a click on a
header takes to sort its 10,000 rows); this prints them as one table:

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
TESTS = ["tests/notebooks/test_jupyterlab_01.py", "tests/notebooks/test_jupyterlab_notebooks.py",
         "tests/experiments/test_jupyterlab_sweep_10k.py"]
#: The rows of the table: each a test's ``lag-<name>.json``.
ROWS = ("01", "02", "03", "04", "06", "sweep-10k")


def main() -> int:
    """Run the browser tests, then print the lag of each notebook's board."""
    for name in os.listdir(ARTIFACTS) if os.path.isdir(ARTIFACTS) else []:
        if name.startswith("lag-"):
            os.remove(os.path.join(ARTIFACTS, name))
    start = time.time()
    rc = subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          *TESTS], cwd=ROOT)
    print("\nlabkit board lag in JupyterLab (headless Chromium): benchmarks/bench_lag.py")
    print(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
          f"· {os.cpu_count()} cores, {platform.system()} · tests took {time.time() - start:.0f} s"
          f" (exit {rc})")
    print(f"{'notebook':>9} {'frames':>6} {'page median':>11} {'p90':>6} {'kernel':>7} "
          f"{'draw':>6} {'wire':>6}")
    for nb in ROWS:
        path = os.path.join(ARTIFACTS, f"lag-{nb}.json")
        if not os.path.exists(path):
            print(f"{nb:>9}  (no figures: its test did not get that far)")
            continue
        with open(path) as f:
            r = json.load(f)
        print(f"{nb:>9} {r['frames']:>6} {_cell(r, 'median_s'):>11} {_cell(r, 'p90_s'):>6} "
              f"{_cell(r, 'kernel_median_s'):>7} {_cell(r, 'draw_median_s'):>6} "
              f"{_cell(r, 'wire_median_s'):>6}")
        if "sort_ms" in r:
            print(f"{'':>9} {r.get('sweep_s', '-')} s sweep; a header click sorts 10,000 rows in "
                  f"{' / '.join(map(str, r['sort_ms']))} ms (page), painted after "
                  f"{' / '.join(map(str, r['sort_painted_ms']))} ms (again: reversed)")
    return rc


def _cell(r: dict, key: str) -> str:
    """A figure in seconds to two decimals, or a dash."""
    return "-" if r.get(key) is None else f"{r[key]:.2f}"


if __name__ == "__main__":
    sys.exit(main())
