"""Ending the processes labkit starts when the process that started them dies.

A kernel can die in ways no ``atexit`` or ``finally`` survives (SIGKILL, the
out-of-memory killer, a restart that kills it).  The processes it started
must not live on without it: a pool process of 130 MB stayed alive under
pid 1 for 38 minutes before this.  Linux tells a child nothing when its
parent dies (``PR_SET_PDEATHSIG`` fires when the parent's *thread* ends,
which a pool started from a worker thread would trip), so each such process
runs :func:`hold_lifeline`: a daemon thread that ends the process once its
parent is no longer the one that started it.

Examples
--------
>>> parent_is_alive(os.getppid())
True
"""

from __future__ import annotations

import os
import threading
import time

__all__ = ["hold_lifeline", "parent_is_alive", "LIFELINE_EVERY"]

#: Seconds between two looks at the parent.
LIFELINE_EVERY = 0.5


def parent_is_alive(parent: int) -> bool:
    """Whether this process's parent is still ``parent`` (an orphan is adopted by another)."""
    return os.getppid() == parent


def hold_lifeline(parent: int | None = None, every: float = LIFELINE_EVERY) -> threading.Thread:
    """End this process (exit status 0) within ``every`` seconds of its parent's death.

    ``parent`` is the pid to outlive no longer: pass the starter's pid, taken
    before the process was started, since a parent that died before this call
    has already left the process to another (its parent now, by default).
    """
    parent = os.getppid() if parent is None else parent

    def watch():
        while parent_is_alive(parent):
            time.sleep(every)
        os._exit(0)  # nobody is left to want our results; skip atexit (it may block)

    thread = threading.Thread(target=watch, daemon=True, name="labkit-lifeline")
    thread.start()
    return thread
