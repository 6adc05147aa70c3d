"""Two runs of ``make test`` on one machine take turns at their serial tests.

The serial tests (tests/tiers.py) measure time and load: a live board's lag in
JupyterLab, a warm fit's start.  ``make test`` runs them alone after the others, but
a second ``make test`` on the same machine can reach its own serial pass at the same
moment.  Side by side, two serial passes made notebook 01's board lag 4.4 s and 4.5 s
against its bound of 3.0 s (issue 44 §4), the kernel's part of it 0.6-1.0 s: the rest
was two JupyterLab servers and two Chromiums sharing two cores.

A session that runs the serial tests (``-m serial``, or a selection starting with it)
holds an exclusive lock on a file in the system's temporary folder for its whole
length, as the multi-host tests hold theirs (tests/multihost/netns.py); a second one
says it waits, and waits.  The lock goes with the process that holds it, so a killed
run leaves nothing to clean.  ``LABKIT_SERIAL_LOCK`` names another file (the tests of
this module use one of their own).
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Callable
from typing import IO

__all__ = ["LOCK_ENV", "lock_path", "runs_serial_tests", "take_turn"]

#: The environment variable naming the lock file, in place of the default.
LOCK_ENV = "LABKIT_SERIAL_LOCK"


def lock_path() -> str:
    """The file two sessions running serial tests lock in turn."""
    return os.environ.get(LOCK_ENV) or os.path.join(tempfile.gettempdir(),
                                                    "labkit-serial-tests.lock")


def runs_serial_tests(markexpr: str) -> bool:
    """Whether ``-m markexpr`` selects the serial tests: ``serial``, ``serial and ...``."""
    words = markexpr.replace("(", " ").replace(")", " ").split()
    return bool(words) and words[0] == "serial"


def take_turn(say: Callable[[str], None], path: str | None = None) -> IO:
    """Lock ``path`` (by default :func:`lock_path`), waiting while another run holds it;
    the open file, which holds the lock until it is closed or the process ends."""
    path = path or lock_path()
    held = open(path, "a")  # noqa: SIM115 (held past this function: the lock)
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        say(f"another run's serial tests hold {path}: these wait their turn")
        fcntl.flock(held, fcntl.LOCK_EX)
        say("their turn came")
    return held
