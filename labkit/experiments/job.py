"""A sweep's run: what ``lk.sweep`` set up (store, engine, scheduler), then the job that runs it.

Making a :class:`SweepJob` does what comes before any trial runs (the function
unwrapped and checked, the store opened, the name claimed, a resumed sweep
found); calling the job (``job(scope)``, in the sweep's
:class:`~labkit.Run`) starts the launcher, drives the loop and returns the
result, releasing the name and the store whatever happens.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from ..errors import TaskError
from ..events import SweepStarted
from ..scheduling import LocalScheduler
from .arguments import SweepConfig, check_pickles, function_of, prepare
from .checkpointing import probe_workers
from .launch import place
from .launch.launchers import launcher_of
from .launch.loop import drive
from .live import LiveSweep, result_of
from .opening import open_sweep
from .spec import SweepSpec
from .store.database import Store
from .store.memory import MemoryStore
from .sweep_result import Again, SweepResult
from .trials.checkpoint_place import PlacedFunction

__all__ = ["SweepJob"]

#: ``extend(config, spec, scheduler)``: how the result runs more trials of the sweep.
Extender = Callable[[SweepConfig, SweepSpec, Any], Again]


class SweepJob:
    """One sweep, checked and set up (its store open, its name claimed); run it as ``job(scope)``."""

    def __init__(self, config: SweepConfig, extend: Extender):
        """Check and set up the sweep of ``config``; nothing runs yet."""
        self.config, self._extend = config, extend
        self.fn, self.holds_gil = function_of(config.fn)
        prepared = prepare(config)
        self.space, self.rule = prepared.space, prepared.rule
        self.owned = config.scheduler is None  # a LocalScheduler of its own, shut down at the end
        self.scheduler = LocalScheduler() if self.owned else config.scheduler
        # placed once: every launcher and check reads this one answer
        self.placement = place(self.scheduler, config.workers_per_trial, self.holds_gil)
        if self.placement.travels:
            check_pickles(self.fn)
        self.placement.check_room()
        # in memory: nothing is written per trial (the result is the engine's records)
        self.store = MemoryStore() if config.store is None else Store(config.store)
        self.owner = uuid.uuid4().hex
        #: a sweep kept in memory checkpoints to a temporary folder, removed when it ends
        self.temporary = config.store is None and config.checkpoints is None
        try:
            self.spec, self.engine = open_sweep(self.store, self.owner, self.fn, config, prepared)
        except BaseException:
            self.store.close()
            if self.owned:
                self.scheduler.shutdown()
            raise
        self.place = self.spec.checkpoints
        try:  # every worker can write there, before any trial runs
            probe_workers(self.scheduler, self.place.location)
        except BaseException:
            self._close()
            raise
        # the function as it travels: it tells each trial where its checkpoints go
        self.fn = PlacedFunction(self.fn, self.place)
        self.live = LiveSweep(self.engine, self.spec)

    def __call__(self, scope: Any) -> SweepResult:
        """Run every trial as the run ``scope``; the result (raised when every trial failed)."""
        self.live.running(scope.id)
        try:
            self._drive(scope)
            result = result_of(self.engine, self._extend(self.config, self.spec, self.scheduler))
            self.store.retain(self.spec.name)  # keep_best, now that every trial has ended
        finally:
            self._close()
        self.store.check()
        _raise_if_all_failed(result)
        return result

    def _close(self) -> None:
        """Release the name, close the store (committing what is queued), remove a
        temporary checkpoint folder, shut down a scheduler of its own."""
        try:
            self.store.release(self.spec.name, self.owner)
            self.store.close()
        finally:
            if self.temporary:
                self.place.location.remove_all()
            if self.owned:
                self.scheduler.shutdown()

    def _drive(self, scope: Any) -> None:
        """Start the launcher, tell the views, and run the loop."""
        engine = self.engine
        engine.scope = scope
        launcher = launcher_of(self.placement, engine, self.fn, self.spec.max_concurrent)
        if scope.sources and any(source.has_subscribers for source in scope.sources):
            spec = self.spec
            scope.emit(
                SweepStarted(
                    scope.id,
                    spec.name,
                    spec.metric,
                    spec.mode,
                    spec.space.describe(),
                    tuple(engine.snapshot()),
                    launcher.slots(),
                    spec.rule_words(),
                    self.store.path,
                    objectives=spec.objectives,
                    modes=spec.modes,
                )
            )
        drive(engine, launcher, scope)


def _raise_if_all_failed(result: SweepResult) -> None:
    """A sweep none of whose trials completed, and some failed: raise the first failure."""
    counts = result.counts()
    others = ("completed", "stopped", "cancelled", "pending")
    if counts.get("failed") and not any(counts.get(status) for status in others):
        first = result.by_status("failed")[0]
        err = TaskError(
            f"no trial of sweep {result.name!r} completed: {counts['failed']} "
            f"failed; trial {first.id} {first.config}: {first.error}",
            user_traceback=first.traceback or "",
        )
        # the records, for a look at every failure (TaskError, of labkit.errors, declares none)
        err.result = result  # type: ignore[attr-defined]
        raise err
