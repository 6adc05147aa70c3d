"""A sweep learns its workers' names: once for each new address, off the trials' path.

The engine tells a :class:`WorkerNamer` each worker a trial starts on
(:meth:`WorkerNamer.seen`: a set lookup, under the engine's lock).  The
store's writer asks it, once a commit, for what it learned
(:meth:`WorkerNamer.take`): if addresses wait to be named, it asks the
scheduler once for all of them (:func:`~labkit.scheduling.dask.worker_names.worker_identities`,
:data:`ASK_WAIT` seconds at most) and hands back their names, which the
store keeps with the sweep (:mod:`.store_workers`).  No trial waits on the
question; the writer asks a last time as the store closes, so a short
sweep's workers are named too.  A failed question is asked again
:data:`RETRY` seconds later at the soonest; a worker the scheduler no longer
knows keeps its address.

Examples
--------
>>> namer = WorkerNamer(lambda: None)          # no cluster: nothing to ask
>>> namer.seen("tcp://a:1 #0"); namer.seen("local")
>>> namer.take(), namer.names
(None, {})
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from ...scheduling.dask.worker_names import worker_addresses, worker_identities

__all__ = ["WorkerNamer", "ASK_WAIT", "RETRY"]

logger = logging.getLogger("labkit.experiments")

#: Most seconds the store's writer waits for the scheduler's answer.
ASK_WAIT = 5.0

#: Least seconds between two questions that failed.
RETRY = 5.0


class WorkerNamer:
    """The names of a sweep's workers, learned as trials start on them; see the module."""

    def __init__(self, client: Callable[[], Any], known: dict[str, dict] | None = None):
        self._client = client  # the sweep's Dask client now (None: none, or not yet)
        self._lock = threading.Lock()
        self.names: dict[str, dict] = dict(known or {})  # address -> {"name", "nthreads"}
        self._waiting: set[str] = set()
        self._next = 0.0  # when a question may be asked (after a failed one)

    def seen(self, worker: str | None) -> None:
        """A trial started on ``worker`` (its address, a slot's, a group's); cheap."""
        for address in worker_addresses(worker):
            if address not in self.names and address not in self._waiting:
                with self._lock:
                    self._waiting.add(address)

    def take(self) -> dict[str, dict] | None:
        """The names learned now of the addresses waiting (the store's writer asks); None: none."""
        with self._lock:
            waiting = set(self._waiting)
        client = self._client() if waiting else None
        if client is None or time.monotonic() < self._next:
            return None
        if getattr(client, "status", "running") != "running":  # closed: it answers nobody
            return None
        try:
            found = worker_identities(client, waiting, timeout=ASK_WAIT)
        except Exception as exc:  # busy, or going: the addresses stay, asked again later
            self._next = time.monotonic() + RETRY
            logger.debug("labkit: asking the workers' names failed: %s", exc)
            return None
        with self._lock:
            self._waiting -= waiting  # those it does not know are gone: they keep addresses
            self.names.update(found)
        return found or None
