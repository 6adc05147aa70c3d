"""The data-parallel trainer: split, run the replicas, reduce, step once; the same everywhere.

Composes the other modules of :mod:`labkit.data_parallel`: each batch is split
by the work load (:mod:`.split`, re-balanced by :mod:`.balance` with
``work_load="auto"``) and handed to a replica group: the devices of this
process (:mod:`.local`), or, with ``scheduler=``, Dask workers that reduce
with ``torch.distributed`` and run the training loops themselves
(:mod:`.dask`).  Both groups keep one declared contract
(:class:`~.replica_group.ReplicaGroup`), so the trainer holds the guards, the
balancing and the reporting once, with no branch per backend.
A step may carry a bucket key: each replica then runs the module that
``bucket_model`` built for that key around its own parameters (:mod:`.bucketing`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch

from ..constraints import InstanceOf, check_arguments
from ..errors import InputError, TrainingError
from ..events import Observable
from .balance import Balancer, WorkLoads
from .bucketing import check_key
from .fit_data import PlannedStep
from .guards import NonFiniteLossError, check_batch, check_policy, warn_skipped
from .local.thread_group import SchedulerThreadGroup, ThreadGroup
from .loops import EpochLoops, OneCall, as_its_stop_said
from .model_sync import ModelSync
from .monitors import Monitors, ReplicaStep
from .replica_group import ReplicaGroup
from .reporting import Reporter
from .reports import StepReport, step_number
from .split import shares

__all__ = ["DataParallelTrainer", "ReplicaStep"]

#: What the trainer's switches may be.
_RULES = {"sync_model": [InstanceOf(bool)]}


class DataParallelTrainer(EpochLoops, Observable):
    """Train ``model`` on batches split across ``devices``, one persistent replica each.

    Parameters
    ----------
    model : torch.nn.Module
        The model; ``optimizer`` steps its parameters.  When it lives on the
        first device it is that device's replica.
    loss_fn : callable
        ``loss_fn(outputs, targets)``, a mean over rows (or a loss module with
        ``reduction="sum"``).
    optimizer : torch.optim.Optimizer
        Over ``model.parameters()``; steps once per batch.
    devices : list, optional
        ``["cuda:0", "cuda:1"]``, ``["cpu:0", "cpu:1"]``...; default every GPU, or the CPU.
    work_load : None, list of float or "auto"
        Relative speed of each device (even by default); ``"auto"`` measures
        and re-balances every step.
    scheduler : labkit.DaskScheduler, optional
        Run one replica per Dask worker, reducing with ``torch.distributed``;
        fits then run as loops on the workers (see :meth:`fit`).  On a
        scheduler whose tasks run on threads of this process (the default
        ``lk.DaskScheduler()``, ``mode="auto"`` or ``"threads"``) the replicas
        run on threads here instead: one per worker thread (every GPU where
        there are GPUs), or one per entry of ``devices``.
    on_nonfinite : {"raise", "skip"}
        A step whose loss is NaN or infinite on some replica changes nothing
        (parameters, optimizer state, buffers) and raises a
        :class:`~labkit.data_parallel.guards.NonFiniteLossError` naming the
        step, replica and device; ``"skip"`` warns instead, returns NaN and
        counts the batch in :attr:`skipped_batches`.
    bucket_model : callable, optional
        ``bucket_model(model, key)`` returns the module a step with
        ``bucket_key=key`` runs, built around ``model``'s own parameters; called
        once per replica and key, when first needed.  With ``work_load="auto"``
        each key has its own shares (:attr:`bucket_shares`).
    sync_model : bool
        With a scheduler the replicas are copies on the workers: after every
        ``fit``, ``step`` and ``evaluate`` (a ``wait=False`` fit: when it
        ends) their state is copied into ``model`` and ``optimizer``, so that
        both hold what the workers hold.  ``False`` skips that copy (it costs
        a read of the parameters a call, ``benchmarks/bench_model_sync.py``):
        the model is then stale after a call that trained, and using it
        raises until :meth:`sync_model` copies it (or :meth:`close`).

    Examples
    --------
    >>> import torch
    >>> model = torch.nn.Linear(3, 1)
    >>> trainer = DataParallelTrainer(model, torch.nn.functional.mse_loss,
    ...                               torch.optim.SGD(model.parameters(), lr=0.1),
    ...                               devices=["cpu:0", "cpu:1"], work_load=[1, 3])
    >>> x, y = torch.randn(8, 3), torch.randn(8, 1)
    >>> loss = trainer.step(x, y)
    >>> [s.stop - s.start for s in trainer.last_split]
    [2, 6]
    >>> trainer.close()
    """

    def __init__(
        self,
        model: torch.nn.Module,
        loss_fn: Callable,
        optimizer,
        devices=None,
        work_load=None,
        scheduler=None,
        balancer: Balancer | None = None,
        on_nonfinite: str = "raise",
        bucket_model: Callable | None = None,
        sync_model: bool = True,
    ):
        check_arguments(_RULES, "DataParallelTrainer", sync_model=sync_model)
        if not isinstance(model, torch.nn.Module):
            raise InputError(
                f"model must be a torch.nn.Module, got {type(model).__name__}", argument="model"
            )
        if not callable(loss_fn):
            raise InputError(f"loss_fn must be callable, got {loss_fn!r}", argument="loss_fn")
        self.on_nonfinite = on_nonfinite
        self.model, self.loss_fn, self.optimizer = model, loss_fn, optimizer
        self.steps, self.closed = 0, False
        self.last_split: list[slice] = []
        self.skipped_batches = 0  # batches skipped for a non-finite loss (on_nonfinite="skip")
        self._monitors = Monitors()
        self._calls = OneCall()  # one call (fit, evaluate, step) at a time
        self._on_shutdown: list[Callable] = []
        self._group: ReplicaGroup = _group(
            model, loss_fn, optimizer, devices, scheduler, bucket_model
        )
        self.names = list(self._group.names)
        self.devices = self._group.devices
        self.replicas = self._group.replicas
        if bucket_model is not None and not callable(bucket_model):
            self._group.close()
            raise InputError(
                f"bucket_model must be callable as bucket_model(model, key), got {bucket_model!r}",
                argument="bucket_model",
            )
        try:
            self._loads = WorkLoads(self.names, work_load, balancer)
            self.balancer, self.work_load = self._loads.balancer, self._loads.work_load
        except BaseException:
            self.closed = True
            self._group.close()  # a refused work load must not leave replicas on the workers
            raise
        #: the model and optimizer kept equal to the replicas after each call
        self._sync = ModelSync(model, optimizer, self._group, after_calls=sync_model)
        self._reporter = Reporter(
            self,
            self.names,
            self.devices,
            type(model).__name__,
            memory=self._group.memory,
        )

    @property
    def on_nonfinite(self) -> str:
        """What a step with a NaN or infinite loss does: ``"raise"`` or ``"skip"``."""
        return self._on_nonfinite

    @on_nonfinite.setter
    def on_nonfinite(self, policy: str) -> None:
        self._on_nonfinite = check_policy(policy)

    @property
    def shares(self) -> list[float]:
        """Each device's current fraction of a batch (of a step without a bucket key)."""
        return self._loads.shares()

    @property
    def bucket_shares(self) -> dict:
        """With ``work_load="auto"``: each bucket key's shares, re-balanced on its own."""
        return self._loads.bucket_shares

    @property
    def scheduler(self):
        """The scheduler whose workers or threads hold the replicas (None in-process).

        Its views see the trainer's fits (runs, steps, each replica's load) too.
        """
        return self._group.scheduler

    @property
    def client(self):
        """The Dask client of the workers that hold the replicas (None on threads)."""
        return self._group.client

    # -- events: the trainer's subscribers, and its scheduler's ------------------------------

    def emit(self, event) -> None:
        """Deliver ``event`` to the trainer's subscribers and to its scheduler's (a dashboard).

        The trainer is a fit's one event source: a run that follows it sees each
        event once, while the scheduler's views see the fits on its workers too.
        """
        super().emit(event)
        scheduler = self.scheduler
        if scheduler is not None and scheduler.has_subscribers:
            scheduler.emit(event)

    @property
    def has_subscribers(self) -> bool:
        """Whether the trainer or its scheduler has subscribers."""
        scheduler = self.scheduler
        return super().has_subscribers or bool(scheduler is not None and scheduler.has_subscribers)

    @property
    def state_every(self) -> float | None:
        """How often the trainer's or its scheduler's subscribers want node state (the least)."""
        scheduler = self.scheduler
        wanted = [super().state_every, scheduler.state_every if scheduler is not None else None]
        known = [w for w in wanted if w is not None]
        return min(known) if known else None

    @property
    def interfaces(self) -> list[str]:
        """Per Dask replica: the network interface its process group uses (``[]`` in-process)."""
        return list(self._group.interfaces)

    @property
    def bucket_steps(self) -> dict:
        """The steps taken with each bucket key so far."""
        return dict(self._reporter.bucket_steps)

    # -- one step ------------------------------------------------------------------------

    def step(self, x: torch.Tensor, y: torch.Tensor, bucket_key=None) -> float:
        """One optimizer step on the batch ``(x, y)``; returns the batch's mean loss.

        ``bucket_key`` (hashable) runs that bucket's modules (see ``bucket_model``);
        without ``bucket_model`` it only labels the step.  A non-finite loss undoes
        the step: it raises, or with ``on_nonfinite="skip"`` warns and returns NaN.
        """
        __tracebackhide__ = True
        self._check_open()
        if not torch.is_grad_enabled():
            raise TrainingError(
                "step trains, so it needs gradients, but it was called under "
                "torch.no_grad() or torch.inference_mode(); use evaluate() to "
                "compute without them",
                step=step_number(self.steps),
            )
        key = check_key(bucket_key, step_number(self.steps))
        n = check_batch(x, y, step_number(self.steps))
        reports: list[StepReport] = []
        with self._calls.held("step"), self._sync.call(), as_its_stop_said(self._group):
            self._run([PlannedStep(x, y, self._split(n, key), key)], reports.append)
        return reports[-1].loss

    def _split(self, rows: int, key=None) -> list[int]:
        """Each device's rows of a batch of ``rows``, by the current shares."""
        if len(self.names) == 1:
            return [rows]
        return shares(rows, self._loads.shares(key)) if rows else [0] * len(self.names)

    def _run(self, planned, done, check=None) -> None:
        """Hand planned steps to the replica group; each report taken, then ``done(report)``."""
        __tracebackhide__ = True
        self._check_open()

        def numbered():
            for step in planned:
                step.number = self.steps
                yield step

        def take(report):
            self._take(report)
            done(report)

        try:
            self._group.steps(numbered(), take, check, self.on_nonfinite)
        except NonFiniteLossError as exc:
            exc.locate(step=step_number(self.steps))
            raise

    def _take(self, report) -> None:
        """One step's report: the count, the split, the balance, the views, skipped batches."""
        if list(self._group.names) != self.names:  # the group went on without a lost worker
            self._regroup()
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
        if self.balancer is not None:
            self._loads.update(report.key, list(report.rows), list(report.seconds))
        self._reporter.report(report, self._loads.shares(report.key))

    def _regroup(self) -> None:
        """Follow the replica group's ranks after it re-formed over fewer workers."""
        names = list(self._group.names)
        self._loads = self._loads.regrouped(names, self.names)
        self.balancer, self.work_load = self._loads.balancer, self._loads.work_load
        self.names = names
        self.devices = self._group.devices
        self._reporter.names, self._reporter.devices = names, self.devices

    # -- monitors and events ----------------------------------------------------------

    def add_monitor(self, fn: Callable[[ReplicaStep], Any], devices=None) -> Callable[[], None]:
        """Call ``fn(ReplicaStep)`` after each replica's backward, in its thread.

        ``devices`` limits it to some device names; the record carries the
        step's ``bucket_key``.  An exception in ``fn`` fails the step like one in
        the replica (naming replica and device).  With a scheduler the monitors
        run on the workers.  Returns a function that removes it.
        """
        remove = self._monitors.add(fn, devices)
        self._group.set_monitors(self._monitors)

        def removing():
            remove()
            self._group.set_monitors(self._monitors)

        return removing

    def on_shutdown(self, fn: Callable) -> None:
        """Call ``fn()`` when the trainer is closed (views stop then)."""
        self._on_shutdown.append(fn)

    # -- state -----------------------------------------------------------------------------

    def state_dict(self) -> dict:
        """The model's and the optimizer's state, and the work load (of each bucket too)."""
        self._check_open()
        state = self._group.state_dict()
        # a snapshot: live tensors would change with the next step (and be shared on load)
        return copy.deepcopy(
            dict(state, shares=self.shares, steps=self.steps, bucket_shares=self.bucket_shares)
        )

    def load_state_dict(self, state: dict) -> None:
        """Restore what :meth:`state_dict` returned, into the model and every replica."""
        self._check_open()
        with self._calls.held("load_state_dict"):
            self._group.load_state_dict(state)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self._sync.loaded()
        self._loads.load(state.get("shares"), state.get("bucket_shares"))
        self.steps = state.get("steps", self.steps)

    def sync_model(self) -> torch.nn.Module:
        """The model with the trained parameters (and the optimizer with its state), now.

        With a scheduler both are copied from the workers; a trainer does so
        after every call anyway unless made with ``sync_model=False``.
        """
        if self.closed:
            raise TrainingError("the trainer is closed")
        with self._calls.held("sync_model"):
            self._sync.pull()
        return self.model

    @property
    def model_stale(self) -> bool:
        """Whether the workers hold a newer state than ``model`` (see ``sync_model=``)."""
        return self._sync.stale

    def close(self) -> None:
        """Stop the replica threads (or tear down the worker group); idempotent.

        The model keeps the trained parameters.  With a scheduler they were
        copied after the last call; with ``sync_model=False`` they are fetched
        now, from a surviving worker after a lost one (a warning says when none
        survived).  The group is torn down on every surviving worker whatever
        happened.
        """
        if self.closed:
            return
        self.closed = True
        try:
            self._sync.close()
        finally:
            try:
                self._group.close()
            finally:
                for fn in self._on_shutdown:
                    fn()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _check_open(self) -> None:
        if self.closed:
            raise TrainingError("the trainer is closed")
        self._group.check_open()

    def __repr__(self):
        shares_ = ", ".join(f"{n}: {s:.2f}" for n, s in zip(self.names, self.shares, strict=False))
        return f"<DataParallelTrainer {type(self.model).__name__} on {shares_}; {self.steps} steps>"


def _group(model, loss_fn, optimizer, devices, scheduler, bucket_model) -> ReplicaGroup:
    """The replica group: Dask workers with a scheduler, else this process's devices.

    A scheduler whose tasks run on threads of this process (the embedded
    default, ``mode="auto"`` or ``"threads"``) trains on replicas over those
    threads: no worker process to start, and faster on a few cores (issue 38).
    """
    if scheduler is not None and getattr(scheduler, "in_process", False):
        return SchedulerThreadGroup(model, loss_fn, optimizer, scheduler, devices, bucket_model)
    if scheduler is not None:
        # imported here: ``distributed`` costs a second to import, and a trainer on
        # threads never needs it
        from .dask.group import DaskReplicaGroup

        return DaskReplicaGroup(model, loss_fn, optimizer, scheduler, bucket_model=bucket_model)
    return ThreadGroup(model, loss_fn, optimizer, devices, bucket_model)
