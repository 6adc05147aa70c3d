"""Run a command at a lower CPU priority, in a session of its own: ``make test``'s parallel pass.

``python -m tests.low_priority N COMMAND...`` starts a new session, lowers the session's
autogroup and the process to niceness ``N``, then becomes ``COMMAND``.

Why a session: Linux (``CONFIG_SCHED_AUTOGROUP``, on by default) shares the CPU first
between sessions, then between the processes of a session by their niceness.  A pass run
with plain ``nice`` in the serial tests' session kept them ahead only of its own processes;
measured here, four busy loops in sessions of their own made the warm-fit test take 29.5 s
against 8.9 s alone, four at ``nice -n 12`` in its session 10.2 s.  A session of its own,
whose autogroup is lowered, gives way to the serial tests as a whole.  Lowering a priority
needs no privilege; where there are no autogroups the file is missing and ``nice`` is all.
The caller ends the pass with a signal to its process group (its id is this process's).
"""

from __future__ import annotations

import os
import sys

__all__ = ["lower_and_run"]


def lower_and_run(niceness: int, command: list[str]) -> None:
    """Become ``command`` in a new session at ``niceness``, or at the caller's own when it
    is lower already (the session's autogroup too: a new one starts at 0)."""
    level = max(niceness, os.nice(0))
    os.setsid()
    try:
        with open("/proc/self/autogroup", "w") as f:
            f.write(str(level))
    except OSError:  # no autogroups here (or a kernel that refuses): nice is all
        pass
    os.nice(level - os.nice(0))
    os.execvp(command[0], command)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: python -m tests.low_priority NICENESS COMMAND...")
    lower_and_run(int(sys.argv[1]), sys.argv[2:])
