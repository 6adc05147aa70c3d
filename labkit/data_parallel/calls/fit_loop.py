"""The trainer's fit loop: ``fit``, ``evaluate`` and ``step``, for every replica group.

:class:`FitLoop` is a part the trainer holds (not a mixin): its own state, its
inputs given when made.  A fit is a :class:`~labkit.Run` whose epochs either
hand planned steps to the replica group (batches from the client, or global
batches drawn from arrays here) or, where the group runs epochs itself and the
data lives on its workers, one epoch at a time to the group
(:mod:`labkit.data_parallel.dask.epochs`): which, the group's capabilities say
(:class:`~labkit.data_parallel.replica_group.FitsEpochs`,
:class:`~labkit.data_parallel.replica_group.EvaluatesSources`).  Either way each
step comes back as a :class:`~labkit.data_parallel.reports.StepReport`, and the
history ``fit`` returns is summed from the same reports the views draw.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator

import torch

from ...checkpoints import check_writable
from ...constraints import Interval, check_arguments
from ...errors import CancelledError, InputError, LabkitError, SchedulerError, TrainingError
from ...events import Observable
from ...runs import start
from ..bucketing import BucketBatch, check_key
from ..fit_data import PlannedStep, Source, WorkerDataset, as_source
from ..guards import check_batch
from ..replica_group import (
    COMMIT_EVERY,
    MAX_FAILURES,
    EpochOptions,
    EvaluatesSources,
    FitsEpochs,
    ReplicaGroup,
)
from ..reporting import Reporter
from ..reports import EpochTally, StepReport, batch_number, step_number
from .model_sync import ModelSync
from .one_call import OneCall
from .stepper import Stepper

__all__ = ["FitLoop", "as_its_stop_said", "checked_validation", "epoch_options"]

#: What a fit's options on the workers may be (None: the default).
_EPOCH_RULES = {"commit_every": [Interval(int, 0), None], "max_failures": [Interval(int, 0), None]}

#: Errors whose epoch already counts from 1 (an error may pass through two fits' loops).
_COUNTED: weakref.WeakSet = weakref.WeakSet()


class FitLoop:
    """``fit``, ``evaluate`` and ``step``: a part the trainer holds, with its inputs given.

    It steps through the trainer's :class:`~.stepper.Stepper` (shared with
    ``step``), holds the trainer for a call through ``calls``, brackets each
    call with the model's copy (``sync``) and reports epochs (``reporter``);
    ``events`` is the fit's run's event source (the trainer).  Whether a group
    runs epochs or evaluates data on its workers is asked once, here.
    """

    def __init__(
        self,
        stepper: Stepper,
        calls: OneCall,
        sync: ModelSync,
        reporter: Reporter,
        events: Observable,
        model_name: str,
    ):
        self.stepper, self.calls, self.sync, self.reporter = stepper, calls, sync, reporter
        self.events, self.model_name = events, model_name
        self.group: ReplicaGroup = stepper.group
        group = stepper.group
        #: the capabilities of the group, asked once (None: the client plans every batch)
        self.epochs: FitsEpochs | None = group if isinstance(group, FitsEpochs) else None
        self.sources: EvaluatesSources | None = (
            group if isinstance(group, EvaluatesSources) else None
        )

    def fit(self, source: Source, epochs: int, options: EpochOptions, validation, wait: bool):
        """The trainer's ``fit`` of checked inputs, as a run of its own holding the trainer."""
        token = self.calls.enter("fit")

        def job(scope):
            self.calls.rename(token, f"fit run {scope.id!r}")
            try:
                # at the end the model holds what the workers hold
                with self.sync.call(), as_its_stop_said(self.group):
                    return self._fitted(scope, source, epochs, options, validation)
            finally:
                self.calls.leave(token)

        detail = {
            "name": self.model_name,
            "epochs": epochs,
            "batches": source.epoch_batches,
            "devices": list(self.stepper.names),
        }
        try:
            return start("fit", [self.events], job, wait=wait, detail=detail)
        except BaseException:  # the job never ran (or ran and left already)
            self.calls.leave(token)
            raise

    def _fitted(self, scope, source: Source, epochs: int, options, validation) -> list[dict]:
        """Every epoch of a fit in its run ``scope``: the history."""
        self.reporter.fit_started(scope.id)
        history = []
        try:
            for epoch in range(epochs):
                history.append(self._epoch(source, epoch, epochs, scope, options, validation))
        except LabkitError as err:
            self.reporter.epoch_finished(ok=False)
            _epoch_from_one(err)
            raise
        except BaseException:
            self.reporter.epoch_finished(ok=False)
            raise
        finally:
            if self.epochs is not None:
                self.epochs.end_fit(source)
        self.reporter.fit_finished()
        return history

    def _epoch(
        self, source: Source, epoch: int, epochs: int, scope, options: EpochOptions, validation=None
    ) -> dict:
        """One pass; its record, from its step reports."""
        __tracebackhide__ = True
        tally = EpochTally(epoch)
        stepper = self.stepper
        self.reporter.epoch_started(epoch, source.epoch_batches, len(stepper.names), epochs)
        if self.epochs is not None and source.on_workers:  # the epoch runs on the workers

            def took(report: StepReport) -> None:
                stepper.take(report)
                tally.add(report)

            summary = self.epochs.fit_epoch(
                source,
                epoch,
                took,
                scope.check,
                run=scope.id,
                shares=stepper.loads.shares,
                policy=stepper.policy,
                options=options,
            )
            tally.redone, tally.recoveries = summary["redone"], summary["recoveries"]
            tally.joined = summary.get("joined", [])
        else:
            stepper.run(source.local().steps(epoch, stepper.loads.shares), tally.add, scope.check)
        if tally.steps == 0 and not tally.skipped:
            raise InputError("no batches to train on", epoch=epoch, argument="batches")
        record = tally.record(None, with_skipped=stepper.policy == "skip")
        if validation is not None:
            data, size, metrics = validation
            values = self._evaluate(as_source(data, size, False, None, what="validation"), metrics)
            record.update({f"val_{k}": v for k, v in values.items()})
        self.reporter.epoch_finished(record=record)
        return record

    def step(self, x: torch.Tensor, y: torch.Tensor, bucket_key=None) -> float:
        """The trainer's ``step`` (documented there), in a call that holds the trainer."""
        __tracebackhide__ = True
        self.stepper.check_open()
        if not torch.is_grad_enabled():
            raise TrainingError(
                "step trains, so it needs gradients, but it was called under "
                "torch.no_grad() or torch.inference_mode(); use evaluate() to "
                "compute without them",
                step=step_number(self.stepper.steps),
            )
        key = check_key(bucket_key, step_number(self.stepper.steps))
        n = check_batch(x, y, step_number(self.stepper.steps))
        reports: list[StepReport] = []
        with self.calls.held("step"), self.sync.call(), as_its_stop_said(self.group):
            planned = PlannedStep(x, y, self.stepper.split(n, key), key)
            self.stepper.run([planned], reports.append)
        return reports[-1].loss

    def evaluate(self, source: Source, metrics: dict | None) -> dict[str, float]:
        """The trainer's ``evaluate`` of a checked source, in a call that holds the trainer."""
        __tracebackhide__ = True
        with (
            self.calls.held("evaluate"),
            self.sync.call(trains=False),
            as_its_stop_said(self.group),
        ):
            return self._evaluate(source, metrics)

    def _evaluate(self, source: Source, metrics: dict | None = None) -> dict[str, float]:
        """:meth:`evaluate` of a checked source, in a call that holds the trainer."""
        __tracebackhide__ = True
        if self.sources is not None and source.on_workers:
            return self.sources.evaluate_source(source, metrics)
        sums: dict[str, float] = {}
        rows = 0
        for planned in source.local().steps(None, self.stepper.loads.shares):
            check_batch(planned.x, planned.y, what="evaluate", batch=batch_number(planned.batch))
            counts = self.stepper.split(len(planned.x), planned.key)
            values = self.group.evaluate(planned.x, planned.y, counts, metrics, planned.key)
            for name, value in values.items():
                sums[name] = sums.get(name, 0.0) + value * len(planned.x)
            rows += len(planned.x)
        if rows == 0:
            raise InputError("no batches to evaluate", argument="batches")
        return {name: total / rows for name, total in sums.items()}


@contextlib.contextmanager
def as_its_stop_said(group: ReplicaGroup) -> Iterator[None]:
    """A call cut short by its scheduler's shutdown raises the reason the stopper gave.

    A sweep stops a group trial by shutting the trial's scheduler down, having
    cancelled it with ``TrialStopped`` first: whichever wait of the call saw the
    shutdown, the trial's call raises that, as on any other placement.
    """
    try:
        yield
    except (SchedulerError, CancelledError) as exc:
        reason = group.stop_reason()
        if reason is None or reason is exc:
            raise
        raise reason from exc


def checked_validation(data, batch_size, metrics) -> tuple:
    """``(data, batch size to evaluate it in, metrics)`` for ``fit(validation=...)``, checked."""
    needs_size = isinstance(data, WorkerDataset) or (
        isinstance(data, tuple) and len(data) == 2 and not isinstance(data, BucketBatch)
    )
    size = (batch_size or 256) if needs_size else None
    as_source(data, size, False, None, what="validation")
    for name, fn in dict(metrics or {}).items():
        if not callable(fn):
            raise InputError(
                f"metric {name!r} must be callable as fn(outputs, targets), got {fn!r}",
                argument="metrics",
            )
    return data, size, dict(metrics or {})


def _epoch_from_one(err: LabkitError) -> LabkitError:
    """``err`` naming its epoch as a board counts it (the first is epoch 1)."""
    if isinstance(err.where.get("epoch"), int) and err not in _COUNTED:
        err.where["epoch"] += 1
        _COUNTED.add(err)
    return err


def epoch_options(commit_every, checkpoint, max_failures) -> EpochOptions:
    """The options of a fit on the workers, checked."""
    check_arguments(_EPOCH_RULES, commit_every=commit_every, max_failures=max_failures)
    if checkpoint is not None:
        checkpoint = check_writable(str(checkpoint))
    return EpochOptions(
        COMMIT_EVERY if commit_every is None else commit_every,
        checkpoint,
        MAX_FAILURES if max_failures is None else max_failures,
    )
