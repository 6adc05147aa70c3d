"""Two runs' serial tests take turns on one machine (tests/machine_turns.py)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import threading

import pytest

from tests.conftest import ROOT
from tests.machine_turns import LOCK_ENV, runs_serial_tests, take_turn

#: A process that holds the lock file (argv[1]) until its standard input closes.
HOLDER = ("import fcntl, sys\n"
          "f = open(sys.argv[1], 'a'); fcntl.flock(f, fcntl.LOCK_EX)\n"
          "print('held', flush=True); sys.stdin.read()\n")


@pytest.mark.parametrize(("markexpr", "serial"), [
    ("serial", True), ("serial and not slow and not browser", True), ("(serial)", True),
    ("not serial", False), ("", False), ("slow", False), ("not slow and not serial", False)])
def test_the_serial_passes_are_told_by_their_mark_expression(markexpr, serial):
    assert runs_serial_tests(markexpr) is serial


def _holder(path):
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_turn_waits_for_the_run_that_holds_the_lock_then_holds_it(tmp_path):
    path = tmp_path / "serial.lock"
    holder = _holder(path)
    said, got = [], []
    waiting = threading.Event()

    def say(words):
        said.append(words)
        waiting.set()

    taker = threading.Thread(target=lambda: got.append(take_turn(say, str(path))))
    try:
        taker.start()
        assert waiting.wait(60), said
        assert "wait their turn" in said[0] and str(path) in said[0]
        assert taker.is_alive() and not got              # still waiting: the lock is held
    finally:
        holder.stdin.close()                             # the other run's pass ends
        holder.wait(60)
    taker.join(60)
    assert got and said[-1] == "their turn came"
    with open(path, "a") as other, pytest.raises(BlockingIOError):
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # this turn now holds it
    got[0].close()
    with open(path, "a") as other:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # closed: free for the next


def test_a_turn_free_at_once_says_nothing(tmp_path):
    said = []
    take_turn(said.append, str(tmp_path / "free.lock")).close()
    assert said == []


def test_a_session_of_serial_tests_waits_for_another_runs_and_one_of_others_does_not(tmp_path):
    path = tmp_path / "serial.lock"
    env = {**os.environ, LOCK_ENV: str(path)}
    env.pop("PYTEST_XDIST_WORKER", None)
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cov",
               "tests/test_machine_turns.py"]
    holder = _holder(path)
    try:
        others = subprocess.run([*command, "-m", "not serial"], cwd=ROOT, env=env,
                                capture_output=True, text=True, timeout=120)
        assert others.returncode == 0 and "wait their turn" not in others.stdout
        serial = subprocess.Popen([*command, "-m", "serial"], cwd=ROOT, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            first = serial.stdout.readline()
            assert "wait their turn" in first, first
            assert serial.poll() is None                  # held back while the lock is held
        finally:
            holder.stdin.close()
            holder.wait(60)
        out, _ = serial.communicate(timeout=120)
    finally:
        if holder.poll() is None:
            holder.kill()
    assert "their turn came" in out
    assert serial.returncode == 5  # no serial test in this file: collected none, as asked
