"""The group checkpoint benchmark runs end to end at small size (no timing is asserted)."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_group_checkpoint_benchmark_runs_quick():
    script = os.path.join(ROOT, "benchmarks", "bench_group_checkpoint.py")
    proc = subprocess.run([sys.executable, script, "--quick"], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for label in ("state_dict()", "before: via client", "after: rank 0", "before / after",
                  "restore via client", "restore on ranks"):
        assert label in proc.stdout, label
    row = next(line for line in proc.stdout.splitlines() if line.strip().endswith(")")
               and " MB |" in line)
    assert row.count("|") == 6 and "nan" not in row  # every figure measured at the quick size
