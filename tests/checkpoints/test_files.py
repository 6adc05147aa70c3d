"""Atomic checkpoint writes: only stale temp files are removed; a killed save's leftover goes."""

import os
import signal
import subprocess
import sys
import time

import numpy as np

import labkit as lk
from labkit.checkpoints import files
from tests.flows.cases import X, chunks


def _temps(folder):
    return sorted(n for n in os.listdir(folder) if n.startswith(".labkit-"))


def _dead_pid():
    """The pid of a process that has exited (and been reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_only_stale_temp_files_of_this_path_are_removed(tmp_path):
    path = tmp_path / "flow.lk"
    prefix = f".labkit-flow.lk.{files._host()}-"
    live = tmp_path / f"{prefix}{os.getpid()}.abc.tmp"       # a save this process is writing
    dead = tmp_path / f"{prefix}{_dead_pid()}.abc.tmp"        # a killed save's leftover
    old = tmp_path / f".labkit-flow.lk.0123abcd-{os.getpid()}.xyz.tmp"  # another host, hours old
    other = tmp_path / f".labkit-other.lk.{files._host()}-{_dead_pid()}.abc.tmp"
    unrelated = tmp_path / ".labkit-flow.lk.notes.tmp"
    for file in (live, dead, old, other, unrelated):
        file.write_bytes(b"partial")
    os.utime(old, (time.time() - 3 * 3600,) * 2)
    lk.Flow([lk.nodes.PCA()]).save(path)
    assert _temps(tmp_path) == sorted(f.name for f in (live, other, unrelated))
    assert isinstance(lk.Flow.load(path)[0], lk.nodes.PCA)


SAVER = """
import sys, numpy as np, labkit as lk
node = lk.nodes.PCA()
node.train(np.random.default_rng(0).normal(size=(20, 2000)))  # 32 MB of statistics
flow = lk.Flow([node])
print("ready", flush=True)
while True:
    flow.save(sys.argv[1])
"""


def _kill_mid_save(path):
    """Start saving a big flow to ``path`` in a loop and SIGKILL it while a temp file exists."""
    folder = path.parent
    proc = subprocess.Popen([sys.executable, "-c", SAVER, str(path)], stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"ready\n"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            temps = [folder / n for n in _temps(folder)]
            if any(t.exists() and t.stat().st_size > 0 for t in temps):
                os.kill(proc.pid, signal.SIGKILL)
                break
            time.sleep(0.002)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stdout.close()
    return proc.pid


def test_a_killed_save_leaves_a_temp_file_the_next_save_removes(tmp_path):
    path = tmp_path / "flow.lk"
    for _ in range(10):  # the kill may land between two saves; then try again
        pid = _kill_mid_save(path)
        left = _temps(tmp_path)
        if left:
            break
    assert left and all(f"-{pid}." in name for name in left), left
    assert (tmp_path / left[0]).stat().st_size < 32 * 10**6  # cut off part-way
    flow = lk.Flow([lk.nodes.PCA(output_dim=2)])
    flow.train([chunks(X)])
    flow.save(path)
    assert _temps(tmp_path) == []
    np.testing.assert_array_equal(lk.Flow.load(path).execute(X), flow.execute(X))
