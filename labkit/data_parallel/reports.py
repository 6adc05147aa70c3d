"""The reports of a fit: what each step did, streamed from the ranks to the client.

Rank 0 of a group knows every step's numbers once the ranks have agreed on
it (:mod:`.rank`): the batch's loss, each rank's rows and seconds.  On Dask
workers it sends them as :class:`StepReport` s through Dask's event stream
(``log_event``), gathered into one message at most every
:data:`REPORT_EVERY` seconds and at the end of a command or an epoch, so
reporting costs a step next to nothing; the client never asks for them.
In-process, the trainer makes the same reports itself.  What ``fit`` returns
and what a board draws are both computed from these reports.

Examples
--------
>>> r = StepReport(epoch=0, step=3, loss=0.5, rows=(2, 6), seconds=(0.1, 0.2), wall=0.25,
...                time=0.0)
>>> r.total_rows, StepReport.from_wire(r.to_wire()) == r
(8, True)
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from ..scheduling.workers.gathering import Gathering

__all__ = [
    "StepReport",
    "ReportStream",
    "EpochTally",
    "REPORT_EVERY",
    "batch_number",
    "step_number",
]

#: Least seconds between two messages of reports from a rank.
REPORT_EVERY = 0.1


@dataclass(frozen=True)
class StepReport:
    """One step of a fit, as every rank agreed on it."""

    epoch: int
    step: int  # the step's number within its epoch, from 0
    loss: float  # the batch's loss (NaN for a skipped step)
    rows: tuple  # each rank's rows
    seconds: tuple  # each rank's forward and backward, in seconds
    wall: float  # the whole step on rank 0, in seconds
    time: float  # when it ended (time.time())
    skipped: bool = False  # a non-finite loss under on_nonfinite="skip"
    key: Any = None  # the bucket key
    shares: tuple = ()  # each rank's fraction of the rows, as planned
    losses: tuple = ()  # each rank's own loss (NaN or infinite where one was)

    def nonfinite(self) -> tuple | None:
        """``(rank, loss)`` of the first rank whose loss was NaN or infinite, or ``None``."""
        return next(((r, v) for r, v in enumerate(self.losses) if not math.isfinite(v)), None)

    def place(self) -> dict:
        """``{"epoch": ..., "batch": ...}`` of the step in a fit, both from 1 (``{}`` for a
        lone step, which belongs to no epoch)."""
        if self.epoch is None or self.epoch < 0 or self.step is None or self.step < 0:
            return {}
        return {"epoch": self.epoch + 1, "batch": batch_number(self.step)}

    @property
    def total_rows(self) -> int:
        return int(sum(self.rows))

    def to_wire(self) -> list:
        """The report as plain values (for Dask's event stream)."""
        return [
            getattr(self, f.name)
            if not isinstance(getattr(self, f.name), tuple)
            else list(getattr(self, f.name))
            for f in dataclasses.fields(self)
        ]

    @classmethod
    def from_wire(cls, values: list) -> StepReport:
        names = [f.name for f in dataclasses.fields(cls)]
        kwargs = dict(zip(names, values, strict=False))
        for name in ("rows", "seconds", "shares", "losses"):
            kwargs[name] = tuple(kwargs[name])
        return cls(**kwargs)


class ReportStream:
    """On rank 0 of a Dask group: reports gathered and sent on ``topic`` every so often.

    ``send(topic, messages)`` is ``dask_worker.log_event`` on a worker.  The
    gathering is :class:`~labkit.scheduling.workers.gathering.Gathering`, as a
    sweep's trial on a worker process gathers its reports.
    """

    def __init__(self, topic: str | None, send, every: float = REPORT_EVERY, run=None):
        self.topic, self.every, self.run = topic, every, run
        self._gathering = Gathering(
            lambda reports, extra: send(topic, {"reports": reports, "run": run, **extra}), every
        )

    def add(self, report: StepReport) -> None:
        """Keep ``report``; send what is kept once ``every`` seconds have passed."""
        if self.topic is not None:
            self._gathering.add(report.to_wire())

    def flush(self, **extra) -> None:
        """Send what is kept now (and ``extra`` fields, e.g. an epoch's end)."""
        if self.topic is not None:
            self._gathering.flush(**extra)


def batch_number(index: int | None) -> int | None:
    """The number a user reads for the batch of index ``index`` in its epoch: from 1.

    As the board counts batches and records count epochs; internal step
    indices (plans, reports) stay from 0, and every error names the batch by this.
    """
    return None if index is None else int(index) + 1


def step_number(taken: int | None) -> int | None:
    """The number a user reads for the step after ``taken`` steps of a trainer: from 1.

    Errors name a step as they name its epoch and batch, the first one 1, so a
    location never mixes two numberings ("epoch 1, batch 1, step 1").
    """
    return None if taken is None else int(taken) + 1


class EpochTally:
    """An epoch's numbers, summed from its step reports: its line of ``fit``'s history."""

    def __init__(self, epoch: int):
        self.epoch = epoch
        self.steps = self.rows = self.skipped = 0
        self.loss_sum = 0.0
        self.first: float | None = None
        self.last: float | None = None
        self.redone = 0
        self.recoveries: list = []
        self.joined: list = []  # workers taken in at the epoch's start (see dask.growing)

    def add(self, report: StepReport) -> None:
        self.first = report.time - report.wall if self.first is None else self.first
        self.last = report.time
        if report.skipped or not math.isfinite(report.loss):
            self.skipped += 1
            return
        self.steps += 1
        self.rows += report.total_rows
        self.loss_sum += report.loss * report.total_rows

    def record(self, seconds: float | None = None, with_skipped: bool = False) -> dict:
        """``epoch``, mean ``loss`` over its rows, ``seconds``, ``samples_per_s``, ``steps``."""
        if seconds is None:
            first, last = self.first, self.last
            seconds = (last - first) if first is not None and last is not None else 0.0
        seconds = max(seconds, 1e-9)
        out: dict = {
            "epoch": self.epoch + 1,  # from 1, as a board counts epochs
            "loss": self.loss_sum / self.rows if self.rows else math.nan,
            "seconds": seconds,
            "samples_per_s": self.rows / seconds,
            "steps": self.steps,
        }
        if with_skipped:
            out["skipped"] = self.skipped
        if self.recoveries:
            out["redone"] = self.redone
            out["recoveries"] = list(self.recoveries)
        if self.joined:
            out["joined"] = list(self.joined)
        return out
