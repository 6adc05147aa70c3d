"""benchmarks/bench_objectives.py runs end to end at small size (no figure is asserted)."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_objectives_benchmark_runs_quick():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks",
                                                        "bench_objectives.py"), "--quick"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for label in ("ZDT1-style, 2 objectives", "ASHA / no early stopping, hypervolume",
                  "ASHA / no early stopping, steps run", "labkit NSGA-II / Optuna alone",
                  "asking and telling in labkit / Optuna alone"):
        assert label in proc.stdout, label
