"""The views benchmark runs end to end at small size (no timing is asserted)."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

pytest.importorskip("ipywidgets")
pytest.importorskip("jupyter_bokeh")
pytest.importorskip("anywidget")


@pytest.mark.timeout(300)
def test_views_benchmark_runs_quick():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_views.py"),
                           "--quick"], capture_output=True, text=True, timeout=280, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for label in ("no views", "board + dashboard open", "views / none (median time)",
                  "client process CPU per training", "board comm messages per second",
                  "dashboard updates per second",
                  "task spans the lanes sent"):
        assert label in proc.stdout, label


@pytest.mark.timeout(300)
def test_views_benchmark_times_a_stored_sweeps_board(tmp_path):
    import labkit as lk
    from tests.experiments import functions as F
    store = str(tmp_path / "stored.db")
    lk.sweep(F.quadratic, {"x": lk.uniform(0, 1)}, trials=20, metric="loss", mode="min",
             store=store, name="small", seed=0)
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_views.py"),
                           "--stored", store, "--name", "small", "--reps", "1"],
                          capture_output=True, text=True, timeout=280, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "stored board of 'small'" in proc.stdout and "MB in all" in proc.stdout, proc.stdout
