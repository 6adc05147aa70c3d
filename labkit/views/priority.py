"""Views run at the lowest OS priority, so they take only the CPU the work leaves.

A view's threads (a writer drawing the board, the cluster sampler) live in the
client process, which on the default in-process cluster is also where the tasks
run (the dashboard's Bokeh server answers a waiting browser: it keeps its maker's
priority, its draws paced by CPU share).  With every core busy, each
millisecond a view spends drawing is a millisecond a task waits.  On Linux a
thread can lower its own priority (``setpriority`` on its thread id): the
kernel then runs it when a core has time, so views still draw, less often
under full load and at full rate otherwise.  Elsewhere this does nothing.

Examples
--------
>>> lower_this_thread() in (True, False)
True
"""

from __future__ import annotations

import os
import threading

__all__ = ["lower_this_thread", "NICENESS"]

#: The niceness view threads give themselves (19 is the lowest priority).  At 19 a
#: board drawing beside two busy worker threads got about 1.5% of a core and drew a frame
#: in 0.3-1 s; at 10 it gets about a tenth of a core, and its frames reach the page
#: within the 0.5 s the views aim at (tests/notebooks/live.py measures it).
NICENESS = 10


def lower_this_thread() -> bool:
    """Give the calling thread the views' low CPU priority, never a higher one than it has;
    whether it now runs at that priority or lower."""
    if not hasattr(os, "setpriority") or not hasattr(threading, "get_native_id"):
        return False
    me = threading.get_native_id()
    try:
        # Linux schedules threads one by one: PRIO_PROCESS with a thread id affects that thread.
        # A process started lower (`nice -n 15 jupyter lab`, or a test pass run beside
        # others) keeps its own: a view would otherwise take a core from the work above it
        # (and only root may raise a priority).
        os.setpriority(os.PRIO_PROCESS, me, max(NICENESS, os.getpriority(os.PRIO_PROCESS, me)))
        return True
    except OSError:
        return False
