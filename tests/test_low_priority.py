"""``make test``'s parallel pass runs lower, in a session of its own (tests/low_priority.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

REPORT = """
import json, os
autogroup = None
if os.path.exists("/proc/self/autogroup"):
    autogroup = open("/proc/self/autogroup").read().split()[-1]
print(json.dumps({"nice": os.nice(0), "pid": os.getpid(), "sid": os.getsid(0),
                  "pgid": os.getpgid(0), "autogroup": autogroup}))
"""


def _lowered(niceness: int, *command: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.low_priority", str(niceness),
                             *command], cwd=ROOT, stdout=subprocess.PIPE, text=True)


def test_the_command_runs_lower_in_a_session_and_process_group_of_its_own():
    proc = _lowered(7, sys.executable, "-c", REPORT)
    out, _ = proc.communicate(timeout=60)
    seen = json.loads(out)
    assert proc.returncode == 0
    assert seen["nice"] == max(7, os.nice(0))
    assert seen["sid"] == seen["pid"] == seen["pgid"] == proc.pid   # it became the command
    assert seen["sid"] != os.getsid(0)
    if seen["autogroup"] is not None:           # Linux with autogroups: the session's too
        assert seen["autogroup"] == str(max(7, os.nice(0)))   # "/autogroup-N nice 7"


def test_a_signal_to_its_process_group_reaches_what_it_started():
    """What the Makefile does on Ctrl-C: the pass and the processes it started stop."""
    child = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', " \
            "'import time; time.sleep(600)']); print('up', flush=True); time.sleep(600)"
    proc = _lowered(5, sys.executable, "-c", child)
    try:
        assert proc.stdout.readline().strip() == "up"
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=30) != 0
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                os.killpg(proc.pid, 0)              # anyone left in the group?
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            raise AssertionError("a process of the lowered group outlived the signal")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
