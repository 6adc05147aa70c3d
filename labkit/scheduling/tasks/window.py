"""The in-flight window: which tasks are open, and each batch's share of the limits.

One :class:`Window` per scheduler holds the book-keeping that bounds work in
flight: the open tasks of every batch, their bytes of client-side chunks,
and the share of ``max_in_flight`` and ``max_bytes_in_flight`` each batch may
use.  A batch joins the window and gets a :class:`Share`, its handle; every
question and change goes through the window's methods, under its one
condition variable, so that "may this batch open one more task?", "open it"
and "this task is done" are decided in one place.

A task is *closed* exactly once: :meth:`Window.close` says whether this call
closed it, which is how a batch records each outcome once however many
paths report it (a worker's result, a cancel, a resubmission).

Examples
--------
>>> window = Window(max_in_flight=2, max_bytes_in_flight=100)
>>> share = window.join(owner=None)
>>> window.has_room(share, nbytes=10)
True
>>> window.open(share, task=0, entry="t0", nbytes=60)
>>> window.has_room(share, nbytes=60)    # over the byte limit
False
>>> window.close(share, task=0, entry="t0"), window.close(share, task=0, entry="t0")
(True, False)
>>> window.n_open(share), window.total_open()
(0, 0)
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

__all__ = ["Window", "Share"]


class Share:
    """One batch's part of a :class:`Window`: its open tasks and their bytes.

    The window changes it, under its lock; its owner passes it back to the
    window's methods.
    """

    __slots__ = ("_owner", "_open", "_bytes", "__weakref__")

    def __init__(self, owner: Any):
        self._owner = weakref.ref(owner) if owner is not None else (lambda: None)
        self._open: dict[int, tuple[Any, int]] = {}  # task id -> (entry, its bytes)
        self._bytes = 0

    @property
    def owner(self) -> Any:
        """The batch that holds this share, ``None`` once it is gone."""
        return self._owner()

    @property
    def n_open(self) -> int:
        """Open tasks."""
        return len(self._open)

    @property
    def nbytes(self) -> int:
        """Bytes of chunks held by the open tasks."""
        return self._bytes

    def add(self, task: int, entry: Any, nbytes: int) -> None:
        """Count ``entry`` open as task ``task``."""
        self._open[task] = (entry, nbytes)
        self._bytes += nbytes

    def holds(self, task: int, entry: Any) -> bool:
        """Whether ``entry`` is the open task ``task``."""
        held = self._open.get(task)
        return held is not None and held[0] is entry

    def remove(self, task: int, entry: Any) -> bool:
        """Take task ``task`` out if ``entry`` is still it; whether it was."""
        held = self._open.get(task)
        if held is None or held[0] is not entry:
            return False
        del self._open[task]
        self._bytes -= held[1]
        return True

    def clear(self) -> list:
        """Take every open task out; their entries."""
        entries = [entry for entry, _ in self._open.values()]
        self._open.clear()
        self._bytes = 0
        return entries


class Window:
    """Open tasks of every batch of one scheduler, within shared limits.

    Parameters
    ----------
    max_in_flight : int
        Most tasks open at once, shared evenly by the batches that have tasks open.
    max_bytes_in_flight : int
        Most bytes of client-side chunks held by open tasks, shared the same
        way; a task larger than a share still runs, alone.
    """

    def __init__(self, max_in_flight: int, max_bytes_in_flight: int):
        self.max_in_flight = max_in_flight
        self.max_bytes_in_flight = max_bytes_in_flight
        # Reentrant: a batch checks its own state under it while the window waits on it.
        self.lock = threading.Condition(threading.RLock())
        self._shares: weakref.WeakSet[Share] = weakref.WeakSet()

    # -- membership ---------------------------------------------------------------------

    def join(self, owner: Any) -> Share:
        """A share of the window for ``owner`` (a batch), kept while the owner keeps it."""
        share = Share(owner)
        with self.lock:
            self._shares.add(share)
        return share

    def leave(self, share: Share) -> None:
        """``share`` takes no more part: its part of the limits goes to the others."""
        with self.lock:
            self._shares.discard(share)
            self.lock.notify_all()

    def owners(self) -> list:
        """The owners of every share still in the window."""
        with self.lock:
            owners = [share.owner for share in self._shares]
        return [owner for owner in owners if owner is not None]

    # -- room -------------------------------------------------------------------------------

    def has_room(self, share: Share, nbytes: int, spare: int = 0) -> bool:
        """Whether ``share`` may open one more task of ``nbytes`` within its part.

        ``spare``: and room for that many more tasks besides, once the part is
        large enough to leave it (so that a full window refills in groups).
        """
        with self.lock:
            if not share.n_open:
                return True  # every batch may always have one task open
            active = sum(1 for s in self._shares if s.n_open) or 1
            part = max(1, self.max_in_flight // active)
            spare = min(spare, part // 8)
            return share.n_open + spare < part and share.nbytes + nbytes <= max(
                1, self.max_bytes_in_flight // active
            )

    def wait(self, ready: Callable[[], bool]) -> None:
        """Block until ``ready()`` (checked under the window's lock after every change)."""
        with self.lock:
            while not ready():
                self.lock.wait()

    def notify(self) -> None:
        """Wake every waiter to check again (an error or a cancel changed what it waits for)."""
        with self.lock:
            self.lock.notify_all()

    # -- open tasks -------------------------------------------------------------------------

    def open(self, share: Share, task: int, entry: Any, nbytes: int) -> None:
        """Count ``entry`` (task id ``task``, ``nbytes`` of chunk) as open in ``share``."""
        with self.lock:
            share.add(task, entry, nbytes)

    def is_open(self, share: Share, task: int, entry: Any) -> bool:
        """Whether ``entry`` is the open task ``task`` of ``share`` (not closed, not cleared)."""
        return share.holds(task, entry)

    def close(self, share: Share, task: int, entry: Any) -> bool:
        """Close task ``task`` if ``entry`` is still it; whether this call closed it."""
        with self.lock:
            if not share.remove(task, entry):
                return False
            self.lock.notify_all()
            return True

    def clear(self, share: Share) -> list:
        """Close every open task of ``share``; the entries that were open."""
        with self.lock:
            entries = share.clear()
            self.lock.notify_all()
        return entries

    def n_open(self, share: Share) -> int:
        """Open tasks of ``share``."""
        return share.n_open

    def nbytes(self, share: Share) -> int:
        """Bytes of chunks held by the open tasks of ``share``."""
        return share.nbytes

    def total_open(self) -> int:
        """Open tasks of every share."""
        with self.lock:
            return sum(s.n_open for s in self._shares)
