"""The data-parallel trainer: split, run the replicas, reduce, step once; the same everywhere.

Composes the other modules of :mod:`labkit.data_parallel`: each batch is split
by the work load (:mod:`.split`, re-balanced by :mod:`.balance` with
``work_load="auto"``) and handed to a replica group: the devices of this
process (:mod:`.local`), or, with ``scheduler=``, Dask workers that reduce
with ``torch.distributed`` and run the training loops themselves
(:mod:`.dask`).  Both groups keep one declared contract
(:class:`~.replica_group.ReplicaGroup`), so the trainer holds the guards, the
balancing and the reporting once, with no branch per backend, in parts it holds:
a :class:`~.calls.stepper.Stepper` and the :class:`~.calls.fit_loop.FitLoop` over it.  A step
may carry a bucket key: each replica then runs the module that ``bucket_model``
built for that key around its own parameters (:mod:`.bucketing`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..constraints import InstanceOf, check_arguments
from ..errors import InputError, TrainingError
from ..events import Observable
from .balance import Balancer, WorkLoads
from .calls.fit_loop import FitLoop, checked_validation, epoch_options
from .calls.model_sync import ModelSync
from .calls.one_call import OneCall
from .calls.stepper import Stepper
from .calls.trainer_state import TrainerState
from .choose_group import choose_group
from .fit_data import as_source
from .guards import check_epochs, check_policy
from .monitors import Monitors, ReplicaStep
from .replica_group import ReplicaGroup
from .reporting import Reporter

__all__ = ["DataParallelTrainer", "ReplicaStep"]

#: What the trainer's switches may be.
_RULES = {"sync_model": [InstanceOf(bool)]}


class DataParallelTrainer(Observable):
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
        policy = check_policy(on_nonfinite)
        self.model, self.loss_fn, self.optimizer = model, loss_fn, optimizer
        self.closed = False
        self._monitors = Monitors()
        self._calls = OneCall()  # one call (fit, evaluate, step) at a time
        self._on_shutdown: list[Callable] = []
        self._group: ReplicaGroup = choose_group(
            model, loss_fn, optimizer, devices, scheduler, bucket_model
        )
        self.replicas = self._group.replicas
        if bucket_model is not None and not callable(bucket_model):
            self._group.close()
            raise InputError(
                f"bucket_model must be callable as bucket_model(model, key), got {bucket_model!r}",
                argument="bucket_model",
            )
        try:
            loads = WorkLoads(list(self._group.names), work_load, balancer)
        except BaseException:
            self.closed = True
            self._group.close()  # a refused work load must not leave replicas on the workers
            raise
        #: the model and optimizer kept equal to the replicas after each call
        self._sync = ModelSync(model, optimizer, self._group, after_calls=sync_model)
        names, name = list(self._group.names), type(model).__name__
        self._reporter = Reporter(self, names, self._group.devices, name, self._group.memory)
        #: the parts the trainer holds: its steps, and the loop of its fits over them
        self._stepper = Stepper(self._group, loads, self._reporter, policy, self._check_open)
        self._loop = FitLoop(self._stepper, self._calls, self._sync, self._reporter, self, name)
        self._state = TrainerState(self._stepper, self._sync, self._calls, self._check_open)

    @property
    def on_nonfinite(self) -> str:
        """What a step with a NaN or infinite loss does: ``"raise"`` or ``"skip"``."""
        return self._stepper.policy

    @on_nonfinite.setter
    def on_nonfinite(self, policy: str) -> None:
        self._stepper.policy = check_policy(policy)

    @property
    def names(self) -> list[str]:
        """The replicas' names (devices or worker addresses), in rank order."""
        return self._stepper.names

    @property
    def devices(self) -> list:
        """Each replica's device, in rank order."""
        return self._stepper.devices

    @property
    def steps(self) -> int:
        """The optimizer steps taken so far."""
        return self._stepper.steps

    @property
    def last_split(self) -> list[slice]:
        """The rows of the last batch each device took."""
        return self._stepper.last_split

    @property
    def skipped_batches(self) -> int:
        """Batches skipped for a non-finite loss (``on_nonfinite="skip"``)."""
        return self._stepper.skipped_batches

    @property
    def balancer(self) -> Balancer | None:
        """The balancer of ``work_load="auto"`` (None with a fixed work load)."""
        return self._stepper.loads.balancer

    @property
    def work_load(self):
        """The work load given, checked (None: even; ``"auto"``: the balancer's)."""
        return self._stepper.loads.work_load

    @property
    def shares(self) -> list[float]:
        """Each device's current fraction of a batch (of a step without a bucket key)."""
        return self._stepper.loads.shares()

    @property
    def bucket_shares(self) -> dict:
        """With ``work_load="auto"``: each bucket key's shares, re-balanced on its own."""
        return self._stepper.loads.bucket_shares

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

    # -- fit and evaluate: the fit loop the trainer holds ----------------------------------

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
            after a lost worker; ``joined``: workers taken in at its start (data on
            workers, a scheduler over all); ``val_...`` with a validation.  An error names the
            epoch and the batch, both from 1 ("epoch 1, batch 1" is the first
            batch); the steps before it are kept.  Either way ``model`` and
            ``optimizer`` then hold what the replicas hold (see ``sync_model``).
        """
        __tracebackhide__ = True
        source = as_source(data, batch_size, shuffle, seed, check_epochs(epochs))
        self._check_open()
        options = epoch_options(commit_every, checkpoint, max_failures)
        if validation is not None:  # checked now, not after the first epoch
            validation = checked_validation(validation, batch_size, metrics)
        return self._loop.fit(source, epochs, options, validation, wait)

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
        return self._loop.evaluate(source, metrics)

    # -- one step ------------------------------------------------------------------------

    def step(self, x: torch.Tensor, y: torch.Tensor, bucket_key=None) -> float:
        """One optimizer step on the batch ``(x, y)``; returns the batch's mean loss.

        ``bucket_key`` (hashable) runs that bucket's modules (see ``bucket_model``);
        without ``bucket_model`` it only labels the step.  A non-finite loss undoes
        the step: it raises, or with ``on_nonfinite="skip"`` warns and returns NaN.
        """
        __tracebackhide__ = True
        return self._loop.step(x, y, bucket_key)

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
        return self._state.state_dict()

    def load_state_dict(self, state: dict) -> None:
        """Restore what :meth:`state_dict` returned, into the model and every replica."""
        self._state.load_state_dict(state)

    def write_checkpoint(self, location, key: str, step=None):
        """Write :meth:`state_dict` to ``location`` (a ``CheckpointLocation``) where it lives.

        On Dask workers rank 0 writes it there, none of it through this process;
        on threads this process does.  Returns the ``CheckpointRef``; what
        ``trial.checkpoint(trainer)`` calls (the guide's data-parallel page).
        """
        return self._state.write(location, key, step)

    def read_checkpoint(self, location, ref) -> None:
        """Load the checkpoint ``ref`` names, each rank reading it from ``location`` itself.

        ``model`` and ``optimizer`` then hold it too, as after a fit (see ``sync_model``).
        """
        self._state.read(location, ref)

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
