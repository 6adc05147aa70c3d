"""The demo and the labkit command, run for real on a local Dask cluster."""

import io
import subprocess
import sys

from labkit.cli import main
from labkit.demo import run_demo


def test_demo_learns_and_matches_serial():
    out = io.StringIO()
    figures = run_demo(chunk_size=200, stream=out)
    assert figures["accuracy"] > 0.95
    assert figures["agreement"] == 1.0
    assert sum(figures["tasks_per_worker"].values()) >= 8
    text = out.getvalue()
    assert "node 0 PCA phase 0: 100%|#" in text
    assert "test accuracy" in text
    speed = figures["speed"]        # timed, and printed beside serial (never asserted on)
    assert speed["serial_s"] > 0 and speed["parallel_s"] > 0 and speed["threads"] >= 1
    assert speed["max_rel_diff"] < 1e-8                  # the parallel PCA equals the serial one
    assert "where parallel pays off" in text and "than serial here" in text


def test_labkit_demo_command_runs():
    proc = subprocess.run([sys.executable, "-m", "labkit", "demo", "--chunk-size", "300"],
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "test accuracy" in proc.stdout


def test_bad_arguments_are_refused(capsys):
    assert main(["demo", "--workers", "0"]) == 2
    assert "must be positive" in capsys.readouterr().err
