"""The engine's bookkeeping of one trial around its record: executions, stops, checkpoints."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .record import TrialRecord
from .status import Status

__all__ = ["TrialState"]


@dataclass
class TrialState:
    """One trial on the client: its :class:`~.record.TrialRecord` and how it runs now.

    The record holds every fact about the trial but its reports (the engine
    replaces it as they change); ``history`` is the live list of its reports,
    which the engine alone grows (:meth:`frozen` is the record with them).
    The rest is what only the engine needs.
    """

    record: TrialRecord
    history: list = field(default_factory=list)  # (step, metrics, time), grown by the engine
    failures: int = 0  # workers lost under it (a worker that left gracefully: its record's moves)
    execution: str | None = None  # the execution whose messages count
    fresh: bool = False  # no report yet from the current execution
    launched: bool = False  # handed to a launcher and not finished
    stop: tuple | None = None  # (kind, reason) once the sweep stopped it
    ref: Any = None  # the latest checkpoint's CheckpointRef, kept while the trial may restart
    seq: int = 0  # checkpoints taken

    @classmethod
    def of(cls, record: TrialRecord) -> TrialState:
        """The state of a trial known by ``record`` (its reports become the live list)."""
        return cls(record.replace(history=()) if record.history else record, list(record.history))

    def update(self, **changes: Any) -> None:
        """Replace the record by one with ``changes`` (never its reports: see ``history``)."""
        if "history" in changes:  # one place holds a live trial's reports: the list
            raise TypeError("a trial's reports are its state's history list, not its record's")
        self.record = self.record.replace(**changes)

    def frozen(self) -> TrialRecord:
        """The trial's record with its reports so far (a tuple: a copy of the live list)."""
        if not self.history:  # the record itself (it holds no reports): no copy made
            return self.record
        return self.record.replace(history=tuple(self.history))

    @property
    def id(self) -> int:
        """The trial's id."""
        return self.record.id

    @property
    def config(self) -> dict:
        """The trial's configuration."""
        return self.record.config

    @property
    def status(self) -> Status:
        """The trial's status."""
        return self.record.status

    @property
    def attempts(self) -> int:
        """Executions started."""
        return self.record.attempts

    @property
    def moves(self) -> int:
        """Executions that ended because their worker left gracefully (no failures)."""
        return self.record.moves

    @property
    def worker(self) -> str | None:
        """Where the latest execution runs."""
        return self.record.worker

    @property
    def started(self) -> float | None:
        """When the first execution began."""
        return self.record.started

    @property
    def ended(self) -> float | None:
        """When the trial ended."""
        return self.record.ended

    @property
    def step(self) -> int | float | None:
        """The last step reported."""
        return self.record.step
