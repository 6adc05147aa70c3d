"""A SIGKILLed client leaves nothing behind: every process labkit started ends with it.

Each embedded cluster kind is opened in a child Python that runs tasks (GIL-holding
ones too, so that ``"auto"`` starts its process pool), and the child is killed with
SIGKILL, as a dying kernel is.  Within 10 s none of its descendants may be alive.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from labkit.scheduling.workers.lifeline import hold_lifeline, parent_is_alive

CHILD = textwrap.dedent("""
    import sys, time
    import numpy as np
    import labkit as lk
    from tests.helpers import PythonMoments

    def main(mode):
        size = {"n_workers": 2} if mode == "processes" else {}
        s = lk.DaskScheduler(mode=mode, **size)
        flow = lk.ParallelFlow([PythonMoments()])
        flow.train([[np.ones((50, 3)) for _ in range(8)]], scheduler=s)
        print("ready", flush=True)
        time.sleep(600)

    if __name__ == "__main__":
        main(sys.argv[1])
""")


def _alive(pids) -> list[int]:
    found = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                found.append(pid)
        except psutil.NoSuchProcess:
            pass
    return found


def _wait_ready(path, proc, timeout=120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(path) as f:
            if "ready" in f.read():
                return
        assert proc.poll() is None, open(path).read()[-3000:]
        time.sleep(0.1)
    pytest.fail("the child never got ready")


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize("mode", ["auto", "threads", "processes"])
def test_a_killed_client_leaves_no_process_behind(mode, tmp_path):
    script, log = tmp_path / "child.py", tmp_path / "child.log"
    script.write_text(CHILD)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, str(script), mode], stdout=out,
                                stderr=subprocess.STDOUT, cwd=root)
    descendants: list[int] = []
    try:
        _wait_ready(log, proc)
        descendants = [p.pid for p in psutil.Process(proc.pid).children(recursive=True)]
        if mode != "threads":
            assert descendants, "the child started no process: nothing was tested"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 10
        while _alive(descendants) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = {pid: " ".join(psutil.Process(pid).cmdline())[:120] for pid in _alive(descendants)}
        assert not left, f"alive 10 s after the client was killed: {left}"
    finally:
        for pid in [proc.pid, *_alive(descendants)]:   # ours only, by their ids
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait(10)


def test_a_lifeline_ends_its_process_when_the_parent_dies(tmp_path):
    """A grandchild holding a lifeline outlives its killed parent by at most a moment."""
    code = textwrap.dedent("""
        import os, subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c",
            "from labkit.scheduling.workers.lifeline import hold_lifeline; import sys, time; "
            "hold_lifeline(int(sys.argv[1]), every=0.1); time.sleep(60)", str(os.getpid())])
        print(child.pid, flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    grandchild = int(proc.stdout.readline())
    try:
        assert _alive([grandchild])
        proc.kill()
        proc.wait(10)
        deadline = time.monotonic() + 20   # the grandchild imports labkit first
        while _alive([grandchild]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive([grandchild])
    finally:
        if _alive([grandchild]):
            os.kill(grandchild, signal.SIGKILL)
        proc.stdout.close()


def test_parent_is_alive_tells_an_orphan():
    assert parent_is_alive(os.getppid())
    assert not parent_is_alive(os.getppid() + 100000)
    assert hold_lifeline(os.getppid(), every=0.01).daemon
