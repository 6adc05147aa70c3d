"""Events folded off the engine's threads: queued as they come, folded in one go by a reader.

A view's subscription is called in the thread that emits each event: with a
hundred trials at once, a hundred threads.  Folding every event there makes
those threads queue on the trackers' locks and trade the GIL: at 100 trials
the dashboard's fold took 38 us of CPU an event, against 5 us folded in one
thread.  A :class:`FoldQueue` only appends the event (atomic, no lock) and
folds what waits, in the order it came, when a reader asks (:meth:`drain`,
just before a draw), or in the thread whose event finds the oldest waiting
longer than ``every`` seconds or ``most`` events waiting, so nothing waits
long when no reader comes.

Examples
--------
>>> seen = []
>>> queue = FoldQueue(seen.append, every=60)
>>> queue(1); queue(2); seen
[]
>>> queue.drain(); seen
[1, 2]
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["FoldQueue", "FOLD_EVERY", "FOLD_MOST"]

logger = logging.getLogger("labkit.views")

#: Longest (seconds) an event waits to be folded when no reader drains the queue (the
#: readers, a board's writer and a dashboard's sessions, drain at least every MAX_GAP).
FOLD_EVERY = 1.0
#: Most events that wait; the thread whose event makes more folds them.
FOLD_MOST = 2048


class FoldQueue:
    """Calls ``fold(event)`` for each event, later and in one thread at a time, in order.

    Parameters
    ----------
    fold : callable
        Folds one event (a tracker).
    every : float
        Longest seconds an event waits when no reader drains.
    most : int
        Most events that wait.
    """

    def __init__(
        self, fold: Callable[[Any], Any], every: float = FOLD_EVERY, most: int = FOLD_MOST
    ):
        self.fold, self.every, self.most = fold, every, most
        self._waiting: collections.deque = collections.deque()
        self._folding = threading.Lock()  # one folder at a time: events stay in order
        self._due = 0.0  # when the waiting events must be folded (time.monotonic)
        self.received = 0  # events put in (a version that moves before they are folded)
        self.batches = 0  # drains that folded something

    def __call__(self, event) -> None:
        """Queue ``event``; fold the queue here if it waited too long or grew too big."""
        waiting = self._waiting
        if not waiting:  # the first to wait sets the deadline (a race only moves it up)
            self._due = time.monotonic() + self.every
        waiting.append(event)
        self.received += 1  # under the GIL; a lost count only delays a draw to the next event
        if len(waiting) >= self.most or time.monotonic() >= self._due:
            self.drain(wait=False)  # another thread folding them is as good

    def drain(self, wait: bool = True) -> None:
        """Fold every event waiting, in the order they came (``wait``: for another folder)."""
        if not self._folding.acquire(blocking=wait):
            return
        try:
            waiting, folded = self._waiting, False
            while waiting:
                event = waiting.popleft()
                folded = True
                try:
                    self.fold(event)
                except Exception:  # a view never fails its source, nor loses the rest
                    logger.exception("labkit view: could not fold %r", event)
            self.batches += folded
        finally:
            self._folding.release()

    @property
    def waiting(self) -> int:
        """Events not folded yet."""
        return len(self._waiting)
