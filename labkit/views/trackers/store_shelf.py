"""The sweeps of a store, followed while another process writes them: a dashboard's shelf.

:class:`StoreShelf` opens a sweep store read-only and keeps a
:class:`~.sweep_tracker.SweepTracker` for each of its sweeps, the same trackers a
scheduler's dashboard draws.  A thread of its own looks at the store at most
every ``interval`` seconds (1 by default) and folds in only what changed
(:class:`~labkit.experiments.store.changes.StoreChanges`: new sweeps, trials
whose row changed, reports appended since); a sweep is ``running`` while a
live process holds its name, ``ended`` after.  It is what
``labkit dashboard --store STORE`` serves (:mod:`.store_dashboard`).
"""

from __future__ import annotations

import logging
import os
import threading

from ...errors import InputError
from ...experiments.store.changes import StoreChanges, StoreLook
from ...experiments.store.database import Store
from ..priority import lower_this_thread
from .device_names import DeviceNames
from .sweep_tracker import SweepTracker

__all__ = ["StoreShelf", "open_store"]

logger = logging.getLogger("labkit.views")


def open_store(path) -> Store:
    """The store at ``path``, opened to read: an InputError naming it when there is no file,
    a StorageError when the file is not a sweep store."""
    if not isinstance(path, (str, os.PathLike)) or not os.path.isfile(path):
        raise InputError(f"no sweep store at {os.fspath(path)!r} (no such file)", argument="store")
    return Store(os.fspath(path), readonly=True)


class StoreShelf:
    """Every sweep of the store at ``path``, kept current by a thread (see the module)."""

    def __init__(self, path, interval: float = 1.0):
        self.path = os.path.abspath(os.fspath(path))
        self.store = open_store(path)
        self.interval = interval
        self._changes = StoreChanges(self.store)
        self._feeds: dict[str, SweepTracker] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.looks = 0  # looks taken (tests wait on it)
        #: the workers by the names their sweeps kept (a live board's names), for the table
        self.names = DeviceNames([])
        self._named: dict = {}
        try:
            self.look()  # the first look here: a store that cannot be read fails the caller
        except BaseException:
            self.store.close()
            raise

    def start(self) -> StoreShelf:
        """Look again every ``interval`` seconds in a thread, until :meth:`stop`."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._loop, daemon=True, name="labkit-store-poll"
            )
            self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop looking and close the store."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        self.store.close()

    def refresh(self) -> None:
        """Nothing: the thread looks at the store."""

    def feeds(self) -> list[SweepTracker]:
        """Every sweep's tracker, in the order they were made."""
        with self._lock:
            return list(self._feeds.values())

    def look(self) -> None:
        """Fold in what changed in the store since the last look."""
        self.fold(self._changes.look())
        self._name_workers()
        self.looks += 1

    def _name_workers(self) -> None:
        """Learn the workers' names the store's sweeps kept, when they changed."""
        kept = self.store.workers()
        if kept != self._named:
            for workers in kept.values():  # each sweep's own: distinct among themselves
                self.names.learn(workers)
            self._named = kept

    def fold(self, look: StoreLook) -> None:
        """One look's changes, into the sweeps' trackers."""
        for sweep in look.sweeps:
            made = SweepTracker(sweep["name"])
            made.describe(
                sweep["name"], sweep["metric"], sweep["mode"], sweep["space"], sweep["rule"]
            )
            made.started = sweep["created"]
            made.set_objectives(sweep.get("objectives") or ())
            for row in look.loaded.get(sweep["name"], ()):
                made.merge(row, exact=True)
            with self._lock:
                self._feeds[sweep["name"]] = made
        trackers = dict(self._feeds)
        for row in look.trials:
            if row["sweep"] in trackers:
                trackers[row["sweep"]].merge(row, exact=True)
        for (name, trial), reports in look.replaced.items():
            if name in trackers:
                trackers[name].report(trial, reports, replace=True)
        by_trial: dict[tuple, list] = {}
        for name, trial, step, metrics in look.reports:
            by_trial.setdefault((name, trial), []).append((step, metrics))
        for (name, trial), reports in by_trial.items():
            if name in trackers:
                trackers[name].report(trial, reports)
        for name, running in look.running.items():
            if name in trackers:
                trackers[name].set_status("running" if running else "ended")

    def _loop(self) -> None:
        lower_this_thread()
        while not self._stop.wait(self.interval):
            try:
                self.look()
            except Exception as exc:  # the file is busy, or gone: try again
                logger.debug("labkit store dashboard: %s: %s", type(exc).__name__, exc)
