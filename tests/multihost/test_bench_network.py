"""The shaped-network benchmark runs end to end at small size (bytes checked, no timing)."""

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_network_benchmark_runs_quick_and_counts_the_bytes(shaping_rights):
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_network.py"),
                           "--quick"], capture_output=True, text=True, timeout=280, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    sections = proc.stdout.split("\n== ")[1:]
    assert [s.splitlines()[0] for s in sections] == ["unshaped", "1 Gbit/s, 0.5 ms",
                                                     "100 Mbit/s, 5 ms"]
    for section in sections:
        rows = {m.group(1).strip(): [float(v) for v in m.group(2).split()]
                for m in re.finditer(r"^  (client chunks.*?|small.*?|generated.*?)\s+"
                                     r"[0-9.]+s\s+(.*)$", section, re.M)}
        assert len(rows) == 5, section
        out, _, _, _, chunk = rows["client chunks (scattered to a worker)"]
        assert chunk <= out < 1.3 * chunk, section        # each chunk crossed once
        out, _, _, _, chunk = rows["generated on the workers, join on workers"]
        assert out < 0.1 * chunk, section                 # the data never left the workers
        assert "Dask trainer:" in section and "between workers" in section
