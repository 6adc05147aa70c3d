"""The store of a sweep kept in memory (``store=None``): nothing written per trial.

A sweep's result and its events come from its engine's records, and no other
kernel can open an in-memory store, so a trial's rows (its configuration,
start, reports and end: three ``UPDATE``\\ s and packed reports a trial) would
be read by nobody.  :class:`MemoryStore` skips them and keeps, as
:class:`~.database.Store` does, what the sweep reads back while it runs: the
claim of its name, its checkpoints' references (a rerun, population-based
training's donors), its rule's state, its workers' names and its exploits.

One exception: ``keep_best`` picks the checkpoints to keep by the ended
trials' rows (:func:`~.kept.retain_op`), so a sweep that keeps its best
checkpoints has its trials written as a file's store has them.

Examples
--------
>>> store = MemoryStore()
>>> store.create_sweep("demo", '{"lr": {}}', "loss", "min", 0, {}, now=False)
>>> store.add_trials("demo", [(0, {"lr": 0.1})])
>>> store.trial_finished("demo", 0, "completed", {"loss": 0.5}, 0.5, 0.5, 3, ended=1.0)
>>> store.flush()
>>> store.sweep("demo")["metric"], store.trials("demo")
('loss', [])
>>> store.close()
"""

from __future__ import annotations

from typing import Any

from ..trials.record import TrialRecord
from . import kept
from .database import Store

__all__ = ["MemoryStore"]


class MemoryStore(Store):
    """A :class:`~.database.Store` in memory that writes no trial's rows (see the module)."""

    def __init__(self) -> None:
        super().__init__(None)
        self._rows: set[str] = set()  # the sweeps whose trials are written (keep_best's)

    def keep_checkpoints(self, sweep: str, retained: kept.Retained) -> None:
        """As a file's store; a sweep that keeps its best checkpoints has its trials written."""
        super().keep_checkpoints(sweep, retained)
        if retained.keep_best is not None:
            self._rows.add(sweep)

    def add_trials(self, sweep: str, trials: list) -> None:
        """As the store's, for a sweep whose trials are written; nothing otherwise."""
        if sweep in self._rows:
            super().add_trials(sweep, trials)

    def trial_config(self, sweep: str, trial: int, config: dict) -> None:
        """As the store's, for a sweep whose trials are written; nothing otherwise."""
        if sweep in self._rows:
            super().trial_config(sweep, trial, config)

    def trial_started(self, sweep: str, trial: int, *args: Any, **kwargs: Any) -> None:
        """As the store's, for a sweep whose trials are written; nothing otherwise."""
        if sweep in self._rows:
            super().trial_started(sweep, trial, *args, **kwargs)

    def trial_reports(self, sweep: str, trial: int, *args: Any, **kwargs: Any) -> None:
        """As the store's, for a sweep whose trials are written; nothing otherwise."""
        if sweep in self._rows:
            super().trial_reports(sweep, trial, *args, **kwargs)

    def drop_reports(self, sweep: str, trial: int, from_step: int) -> None:
        """As the store's, for a sweep whose trials are written; nothing otherwise."""
        if sweep in self._rows:
            super().drop_reports(sweep, trial, from_step)

    def trial_pending(self, sweep: str, trial: int) -> None:
        """As the store's, for a sweep whose trials are written; nothing otherwise."""
        if sweep in self._rows:
            super().trial_pending(sweep, trial)

    def trial_finished(self, sweep: str, trial: int, *args: Any, **kwargs: Any) -> None:
        """As the store's, for a sweep whose trials are written; nothing otherwise."""
        if sweep in self._rows:
            super().trial_finished(sweep, trial, *args, **kwargs)

    def trial_ended(self, sweep: str, record: TrialRecord) -> None:
        """As the store's, for a sweep whose trials are written; nothing otherwise."""
        if sweep in self._rows:
            super().trial_ended(sweep, record)
