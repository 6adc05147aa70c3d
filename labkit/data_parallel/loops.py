"""Epoch loops of the data-parallel trainer: ``fit`` and ``evaluate``, for every replica group.

A fit is a :class:`~labkit.Run` whose epochs either hand planned steps to the
replica group (batches from the client, or global batches drawn from arrays
here) or, where the group runs epochs itself and the data lives on its
workers, one epoch at a time to the group (:mod:`.dask.epochs`): which, the
group's capability flag says (:class:`~.replica_group.ReplicaGroup`).  Either way
each step comes back as a :class:`~.reports.StepReport`, and the history
``fit`` returns is summed from the same reports the views draw.
"""

from __future__ import annotations

import contextlib
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import torch

from ..checkpoints import check_writable
from ..constraints import Interval, check_arguments
from ..errors import CancelledError, InputError, LabkitError, SchedulerError, TrainingError
from ..runs import start
from .balance import WorkLoads
from .bucketing import BucketBatch
from .fit_data import Source, WorkerDataset, as_source
from .guards import check_batch, check_epochs
from .model_sync import ModelSync
from .replica_group import COMMIT_EVERY, MAX_FAILURES, EpochOptions, ReplicaGroup
from .reporting import Reporter
from .reports import EpochTally, StepReport, batch_number

__all__ = ["EpochLoops", "OneCall", "as_its_stop_said"]

#: What a fit's options on the workers may be (None: the default).
_EPOCH_RULES = {"commit_every": [Interval(int, 0), None], "max_failures": [Interval(int, 0), None]}

#: Errors whose epoch already counts from 1 (an error may pass through two fits' loops).
_COUNTED: weakref.WeakSet = weakref.WeakSet()


class OneCall:
    """The one call a trainer runs at a time (a fit, evaluate, a step...); a second is refused.

    Two calls at once would send two runs' steps into one replica group: on Dask
    workers their collectives cross (a gloo timeout, a broken group), on threads
    their autograd graphs do.  So the second call is refused at once, naming the
    run that holds the trainer.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holder: list | None = None  # [what, since], the same list is the token

    def enter(self, what: str) -> list:
        """Hold the trainer for ``what``; a token for :meth:`leave`; raises if it is held."""
        with self._lock:
            holder = self._holder
            if holder is not None:
                raise TrainingError(
                    f"this trainer is busy with {holder[0]} (for "
                    f"{time.monotonic() - holder[1]:.1f} s), so it cannot {what} now: a "
                    "trainer runs one call at a time; wait for that one (run.result()) or "
                    "cancel it (run.cancel()) first, or use a second trainer",
                    busy=holder[0],
                )
            token = self._holder = [what, time.monotonic()]
            return token

    def rename(self, token: list, what: str) -> None:
        """Name what holds the trainer better once known (a fit's run id)."""
        token[0] = what

    def leave(self, token: list) -> None:
        """Let go of the trainer, if ``token`` still holds it (idempotent)."""
        with self._lock:
            if self._holder is token:
                self._holder = None

    @contextlib.contextmanager
    def held(self, what: str) -> Iterator[None]:
        """Hold the trainer for the block's call."""
        token = self.enter(what)
        try:
            yield
        finally:
            self.leave(token)


class EpochLoops:
    """``fit`` and ``evaluate`` over batches or data, for a trainer with a replica group."""

    # what the trainer gives its loops
    _group: ReplicaGroup
    _reporter: Reporter
    _calls: OneCall
    _loads: WorkLoads
    _sync: ModelSync
    names: list[str]
    model: torch.nn.Module
    on_nonfinite: str

    if TYPE_CHECKING:

        def _check_open(self) -> None: ...

        def _run(self, planned: Any, done: Callable, check: Callable | None = None) -> None: ...

        def _take(self, report: StepReport) -> None: ...

        def _split(self, rows: int, key: Any = None) -> list[int]: ...

    def fit(
        self,
        data,
        epochs: int = 1,
        batch_size: int | None = None,
        shuffle: bool = True,
        seed=None,
        wait: bool = True,
        commit_every: int | None = None,
        checkpoint=None,
        max_failures: int | None = None,
        validation=None,
        metrics: dict | None = None,
    ):
        """Train for ``epochs`` passes over ``data``.

        Parameters
        ----------
        data
            Batches (``(x, y)`` pairs: a list, a ``DataLoader``, bucket batches);
            or ``(X, y)`` arrays with ``batch_size`` (Dask arrays stay on the
            workers, each replica reading its own worker's blocks); or
            :func:`~labkit.on_workers` ``(make_dataset)``.
        epochs : int
        batch_size : int, optional
            Rows of a global batch, for arrays and datasets: every row once an epoch.
        shuffle, seed
            The rows' order, drawn anew each epoch from ``seed``.
        wait : bool
            ``False`` returns a :class:`~labkit.Run` at once (``run.cancel()``
            stops every replica after the same step).
        commit_every, checkpoint, max_failures
            With data on Dask workers: steps between two commits (a lost worker
            costs at most that many again), a file each commit is also written
            to (labkit's safe format), and how many workers may be lost.
        validation, metrics : optional
            Data as :meth:`evaluate` takes it (``(X, y)`` arrays in batches of
            ``batch_size``), evaluated after every epoch: each record gets
            ``val_loss`` and ``val_<name>`` for every ``name -> fn(outputs,
            targets)`` of ``metrics``.

        Returns
        -------
        list of dict
            One record an epoch: ``epoch`` (from 1, as a board counts them), mean
            ``loss`` over its rows, ``seconds``, ``samples_per_s``, ``steps``;
            ``skipped`` under ``on_nonfinite="skip"``; ``redone`` and ``recoveries``
            after a lost worker; ``val_...`` with a validation.  An error names the
            epoch and the batch, both from 1 ("epoch 1, batch 1" is the first
            batch); the steps before it are kept.  Either way ``model`` and
            ``optimizer`` then hold what the replicas hold (see ``sync_model``).
        """
        __tracebackhide__ = True
        source = as_source(data, batch_size, shuffle, seed, check_epochs(epochs))
        self._check_open()
        options = epoch_options(commit_every, checkpoint, max_failures)
        if validation is not None:  # checked now, not after the first epoch
            validation = _validation(validation, batch_size, metrics)
        return self._start_fit(source, epochs, options, validation, wait)

    def _start_fit(self, source: Source, epochs: int, options, validation, wait: bool):
        """The fit as a run of its own, holding the trainer until it ends."""
        token = self._calls.enter("fit")

        def job(scope):
            self._calls.rename(token, f"fit run {scope.id!r}")
            try:
                # at the end the model holds what the workers hold
                with self._sync.call(), as_its_stop_said(self._group):
                    return self._fitted(scope, source, epochs, options, validation)
            finally:
                self._calls.leave(token)

        detail = {
            "name": type(self.model).__name__,
            "epochs": epochs,
            "batches": source.epoch_batches,
            "devices": list(self.names),
        }
        try:
            return start("fit", [self], job, wait=wait, detail=detail)
        except BaseException:  # the job never ran (or ran and left already)
            self._calls.leave(token)
            raise

    def _fitted(self, scope, source: Source, epochs: int, options, validation) -> list[dict]:
        """Every epoch of a fit in its run ``scope``: the history."""
        self._reporter.fit_started(scope.id)
        history = []
        try:
            for epoch in range(epochs):
                history.append(self._epoch(source, epoch, epochs, scope, options, validation))
        except LabkitError as err:
            self._reporter.epoch_finished(ok=False)
            _epoch_from_one(err)
            raise
        except BaseException:
            self._reporter.epoch_finished(ok=False)
            raise
        finally:
            self._group.end_fit(source)
        self._reporter.fit_finished()
        return history

    def _epoch(
        self, source: Source, epoch: int, epochs: int, scope, options: EpochOptions, validation=None
    ) -> dict:
        """One pass; its record, from its step reports."""
        __tracebackhide__ = True
        tally = EpochTally(epoch)
        self._reporter.epoch_started(epoch, source.epoch_batches, len(self.names), epochs)
        if self._group.runs_epochs and source.on_workers:  # the epoch runs on the workers

            def took(report: StepReport) -> None:
                self._take(report)
                tally.add(report)

            summary = self._group.fit_epoch(
                source,
                epoch,
                took,
                scope.check,
                run=scope.id,
                shares=self._loads.shares,
                policy=self.on_nonfinite,
                options=options,
            )
            tally.redone, tally.recoveries = summary["redone"], summary["recoveries"]
        else:
            self._run(source.local().steps(epoch, self._loads.shares), tally.add, scope.check)
        if tally.steps == 0 and not tally.skipped:
            raise InputError("no batches to train on", epoch=epoch, argument="batches")
        record = tally.record(None, with_skipped=self.on_nonfinite == "skip")
        if validation is not None:
            data, size, metrics = validation
            values = self._evaluate(as_source(data, size, False, None, what="validation"), metrics)
            record.update({f"val_{k}": v for k, v in values.items()})
        self._reporter.epoch_finished(record=record)
        return record

    def evaluate(
        self, data, metrics: dict | None = None, batch_size: int | None = None
    ) -> dict[str, float]:
        """Mean loss and ``metrics`` over ``data``, the replicas evaluating in parallel.

        ``data`` is what :meth:`fit` takes; ``metrics`` maps names to
        ``fn(outputs, targets)`` giving a mean over rows (e.g. accuracy); every
        value is weighted by rows.  Bucket batches run their bucket's modules.
        """
        __tracebackhide__ = True
        source = as_source(data, batch_size, False, None, what="evaluate")
        self._check_open()
        with (
            self._calls.held("evaluate"),
            self._sync.call(trains=False),
            as_its_stop_said(self._group),
        ):
            return self._evaluate(source, metrics)

    def _evaluate(self, source: Source, metrics: dict | None = None) -> dict[str, float]:
        """:meth:`evaluate` of a checked source, in a call that holds the trainer."""
        __tracebackhide__ = True
        if self._group.runs_epochs and source.on_workers:
            return self._group.evaluate_source(source, metrics)
        sums: dict[str, float] = {}
        rows = 0
        for planned in source.local().steps(None, self._loads.shares):
            check_batch(planned.x, planned.y, what="evaluate", batch=batch_number(planned.batch))
            counts = self._split(len(planned.x), planned.key)
            values = self._group.evaluate(planned.x, planned.y, counts, metrics, planned.key)
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


def _validation(data, batch_size, metrics) -> tuple:
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
