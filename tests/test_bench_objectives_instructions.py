"""benchmarks/bench_objectives.py's one run, which ``--instructions`` counts under valgrind."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "benchmarks", "bench_objectives.py")


def test_each_run_counted_by_instructions_runs_alone_and_quietly():
    for mode in ("optuna", "nsga2", "random"):
        proc = subprocess.run([sys.executable, BENCH, "--one-run", mode, "--cost-trials", "6"],
                              capture_output=True, text=True, timeout=300, cwd=ROOT)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "cost of a trial" not in proc.stdout  # one run: nothing of the bench's report
