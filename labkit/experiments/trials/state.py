"""The engine's bookkeeping of one trial around its record: executions, stops, checkpoints."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .record import TrialRecord
from .status import Status

__all__ = ["TrialState"]


@dataclass
class TrialState:
    """One trial on the client: its :class:`~.record.TrialRecord` and how it runs now.

    The record holds every fact about the trial (the engine replaces it as
    they change); the rest is what only the engine needs.
    """

    record: TrialRecord
    failures: int = 0  # workers lost under it
    execution: str | None = None  # the execution whose messages count
    fresh: bool = False  # no report yet from the current execution
    launched: bool = False  # handed to a launcher and not finished
    stop: tuple | None = None  # (kind, reason) once the sweep stopped it
    blob: bytes | None = None  # latest checkpoint, kept while the trial may restart
    seq: int = 0  # checkpoints taken

    def update(self, **changes: Any) -> None:
        """Replace the record by one with ``changes``."""
        self.record = self.record.replace(**changes)

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
    def history(self) -> list:
        """The trial's reports so far (the engine appends to this list)."""
        return self.record.history

    @property
    def attempts(self) -> int:
        """Executions started."""
        return self.record.attempts

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
