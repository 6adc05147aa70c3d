"""One trial, as everybody sees it: the engine, the store, the events, the result and the views.

:class:`TrialRecord` is frozen and built by keyword (Optuna's ``FrozenTrial``
is the model): a change is a new record (:meth:`TrialRecord.replace`, checked
as any other).  Its ``history`` is a tuple of ``(step,
metrics, time)`` in report order, as the trial had reported when the record
was made: the live list a running trial's reports grow is the engine's
(:class:`~.state.TrialState`), never a record's.  A plain row (a board's table
row, a snapshot, what ``SweepStarted`` carries) is :meth:`TrialRecord.row`.

Examples
--------
>>> r = TrialRecord(id=3, config={"lr": 0.1}, status="completed", metrics={"loss": 0.5},
...                 history=[(0, {"loss": 0.5}, 0.0)], value=0.5)
>>> r.status is Status.COMPLETED, r.row(history=False)["config"], r.curve("loss")
(True, {'lr': 0.1}, ([0], [0.5]))
>>> r.history, r.replace(value=0.4).history is r.history
(((0, {'loss': 0.5}, 0.0),), True)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import InputError
from .status import Status

__all__ = ["TrialRecord", "Status", "better"]

#: The columns of a row, in order (the history, when asked for, comes last).
COLUMNS = (
    "id",
    "config",
    "status",
    "value",
    "best",
    "step",
    "attempts",
    "moves",
    "worker",
    "reason",
    "error",
    "traceback",
    "metrics",
    "objectives",
    "constraints",
    "started",
    "ended",
)


@dataclass(frozen=True, kw_only=True)
class TrialRecord:
    """One trial: ``id``, ``config``, ``status``, final ``metrics``, its ``history`` of reports.

    ``value`` is the metric's latest (final, once ended) value, ``best`` its
    best value reported, ``step`` the last step reported; ``error`` and
    ``traceback`` say why a trial failed, ``reason`` why one was stopped;
    ``attempts`` counts its executions, ``worker`` is where the latest ran;
    ``moves`` counts those of them that ended because their worker left
    gracefully (a retirement, a lifetime's end: the trial went on elsewhere from
    its latest checkpoint), which are no failures.  ``objectives`` is
    ``{name: final value}`` of every objective of the sweep once the trial
    ended with all of them (None before; a single metric's too, ``value`` then).
    """

    id: int
    config: dict
    status: Status = Status.PENDING
    metrics: dict | None = None
    history: tuple = ()
    value: float | None = None
    best: float | None = None
    step: int | float | None = None
    attempts: int = 0
    moves: int = 0
    worker: str | None = None
    error: str | None = None
    traceback: str | None = None
    reason: str | None = None
    started: float | None = None
    ended: float | None = None
    objectives: dict | None = None
    #: the values of the sweep's ``constraints=`` on the final metrics (each <= 0: feasible)
    constraints: tuple | None = None
    #: where the sweep keeps the trial's checkpoint (a SavedCheckpoints; None: a record by hand)
    saved: Any = dataclasses.field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.status, Status):  # one spelling: a word becomes the enum
            object.__setattr__(self, "status", Status(self.status))
        if not isinstance(self.history, tuple):  # a list given is copied: nobody grows it
            object.__setattr__(self, "history", tuple(self.history))
        if self.constraints is not None and not isinstance(self.constraints, tuple):
            object.__setattr__(self, "constraints", tuple(self.constraints))

    def replace(self, **changes: Any) -> TrialRecord:
        """A copy with ``changes``, checked by ``__post_init__`` as a record built anew is.

        The engine's hot path (a record a report): the fields are copied at once
        rather than set one by one through the frozen ``__init__``, which costs
        over twice as much; what ``__init__`` would check is checked all the same.
        """
        if not _FIELDS.issuperset(changes):
            raise TypeError(f"TrialRecord has no field {sorted(changes.keys() - _FIELDS)[0]!r}")
        new = object.__new__(TrialRecord)
        new.__dict__.update(self.__dict__, **changes)  # a frozen dataclass's fields: its __dict__
        new.__post_init__()
        return new

    def row(self, history: bool = True) -> dict:
        """The record as a plain row (``history``: with a copy of its reports)."""
        out = {name: getattr(self, name) for name in COLUMNS}
        out["config"] = dict(self.config)
        if history:
            out["history"] = [(s, dict(m), t) for s, m, t in self.history]
        return out

    as_dict = row

    @classmethod
    def of(cls, row: Mapping[str, Any], history: Sequence | None = None) -> TrialRecord:
        """A record from a row (the store's, a snapshot's); ``history`` its reports."""
        known = {k: row[k] for k in COLUMNS if k in row and row[k] is not None}
        known["config"] = dict(row.get("config") or {})
        known.setdefault("status", Status.PENDING)
        reports = history if history is not None else row.get("history")
        return cls(history=tuple(reports or ()), **known)

    def checkpoint(self, storage_options: dict | None = None) -> Any:
        """The trial's last kept checkpoint, decoded, read from the sweep's location.

        Works in any process that reaches the location (give ``storage_options``
        for object storage: the store keeps the URL alone).  A trial whose
        checkpoint was not kept (retention's ``keep_best``, none taken) is a
        labkit error that says so.
        """
        if self.saved is None:
            raise InputError(
                f"trial {self.id}'s record knows no sweep store: read it with "
                "lk.load_sweep(store, name), or from the result lk.sweep returned"
            )
        return self.saved.load(self.id, storage_options)

    def curve(self, metric: str) -> tuple[list, list]:
        """``(steps, values)`` of ``metric`` over the history (for a plot)."""
        points = [(s, m[metric]) for s, m, _ in self.history if metric in m]
        return [p[0] for p in points], [p[1] for p in points]

    @property
    def seconds(self) -> float | None:
        """How long the trial ran (wall time), when it ended."""
        return None if self.started is None or self.ended is None else self.ended - self.started


_FIELDS = frozenset(f.name for f in dataclasses.fields(TrialRecord))


def better(value: float | None, than: float | None, mode: str) -> bool:
    """Whether ``value`` is a finite improvement on ``than`` in ``mode`` (``than`` None: any)."""
    if value is None or math.isnan(value):
        return False
    if than is None or math.isnan(than):
        return True
    return value > than if mode == "max" else value < than
