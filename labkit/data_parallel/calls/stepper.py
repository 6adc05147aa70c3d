"""The trainer's steps: planned steps handed to the replica group, each report taken.

A part the trainer holds, and its fit loop holds too (:mod:`.fit_loop`): it
owns the step count, the last split, the skipped batches, the work loads and
the policy for a non-finite loss, and follows a group that
:class:`~labkit.data_parallel.replica_group.Recovers` when it goes on over
fewer workers.  Its inputs are explicit: the group, the work loads, the
reporter, and a check that the trainer is open.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..balance import WorkLoads
from ..guards import NonFiniteLossError, warn_skipped
from ..replica_group import Recovers, ReplicaGroup
from ..reporting import Reporter
from ..reports import StepReport, step_number
from ..split import shares

__all__ = ["Stepper"]


class Stepper:
    """Hands planned steps to ``group``; each report counted, balanced and shown."""

    def __init__(
        self,
        group: ReplicaGroup,
        loads: WorkLoads,
        reporter: Reporter,
        policy: str,
        check_open: Callable[[], None],
    ):
        self.group, self.loads, self.reporter = group, loads, reporter
        #: what a step with a NaN or infinite loss does ("raise" or "skip"), checked
        self.policy = policy
        self.check_open = check_open
        self.names = list(group.names)
        self.devices = group.devices
        self.steps = 0
        self.last_split: list[slice] = []
        self.skipped_batches = 0  # batches skipped for a non-finite loss (policy "skip")
        # asked once: only a group that recovers goes on over fewer workers
        self.follows_ranks = isinstance(group, Recovers)

    def split(self, rows: int, key: Any = None) -> list[int]:
        """Each device's rows of a batch of ``rows``, by the current shares."""
        if len(self.names) == 1:
            return [rows]
        return shares(rows, self.loads.shares(key)) if rows else [0] * len(self.names)

    def run(
        self,
        planned: Iterable[Any],
        done: Callable[[StepReport], None],
        check: Callable[[], None] | None = None,
    ) -> None:
        """Hand planned steps to the replica group; each report taken, then ``done(report)``."""
        __tracebackhide__ = True
        self.check_open()

        def numbered():
            for step in planned:
                step.number = self.steps
                yield step

        def take(report):
            self.take(report)
            done(report)

        try:
            self.group.steps(numbered(), take, check, self.policy)
        except NonFiniteLossError as exc:
            exc.locate(step=step_number(self.steps))
            raise

    def take(self, report: StepReport) -> None:
        """One step's report: the count, the split, the balance, the views, skipped batches."""
        if self.follows_ranks and list(self.group.names) != self.names:
            self.regroup()  # the group went on without a lost worker
        ends = [sum(report.rows[: i + 1]) for i in range(len(report.rows))]
        self.last_split = [slice(e - c, e) for c, e in zip(report.rows, ends, strict=True) if c]
        if report.skipped:
            self.skipped_batches += 1
            rank, loss = report.nonfinite() or (None, report.loss)
            error = (
                NonFiniteLossError.of(loss, rank, self.names[rank])
                if rank is not None
                else NonFiniteLossError(loss=loss)
            )
            error.locate(**report.place(), step=step_number(self.steps))
            warn_skipped(error, self.skipped_batches)
            return
        self.steps += 1
        if self.loads.balancer is not None:
            self.loads.update(report.key, list(report.rows), list(report.seconds))
        self.reporter.report(report, self.loads.shares(report.key))

    def regroup(self) -> None:
        """Follow the replica group's ranks after it re-formed over fewer (or more) workers."""
        names = list(self.group.names)
        self.loads = self.loads.regrouped(names, self.names)
        self.names = names
        self.devices = self.group.devices
        self.reporter.names, self.reporter.devices = names, self.devices
