"""The data-parallel trainer: split, run replicas in parallel, reduce, step once, broadcast.

Composes the other modules of :mod:`labkit.data_parallel`: each batch is split
by the work load (:mod:`.split`, re-balanced by :mod:`.balance` with
``work_load="auto"``), the persistent replicas (:mod:`.replicate`) run forward
and backward side by side (:mod:`.parallel_apply`), gradients and buffers are
reduced into the model (:mod:`.reduce`), the optimizer steps once and the
parameters are broadcast back.  With ``scheduler=`` the replicas live on Dask
workers instead and reduce with ``torch.distributed`` (:mod:`.distributed`).
A step may carry a bucket key: each replica then runs the module that
``bucket_model`` built for that key around its own parameters (:mod:`.bucketing`).
"""

from __future__ import annotations

import contextlib
import copy
import time
import warnings
from typing import Any, Callable

import torch

from ..errors import InputError, TrainingError
from ..events import Observable
from .balance import Balancer, WorkLoads
from .bucketing import BucketModules, check_key
from .devices import as_devices
from .guards import (NonFiniteLossError, check_batch, check_loss, check_policy, first_nonfinite,
                     warn_skipped)
from .monitors import Monitors, ReplicaStep
from .parallel_apply import ReplicaThreads
from .reduce import BatchNormJoin, GradientReducer, average_buffers
from .replicate import broadcast, replicate
from .reporting import Reporter
from .split import shares
from .loops import EpochLoops

__all__ = ["DataParallelTrainer", "ReplicaStep"]


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
        Run one replica per Dask worker, reducing with ``torch.distributed``.
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

    def __init__(self, model: torch.nn.Module, loss_fn: Callable, optimizer, devices=None,
                 work_load=None, scheduler=None, balancer: Balancer | None = None,
                 on_nonfinite: str = "raise", bucket_model: Callable | None = None):
        if not isinstance(model, torch.nn.Module):
            raise InputError(f"model must be a torch.nn.Module, got {type(model).__name__}",
                             argument="model")
        if not callable(loss_fn):
            raise InputError(f"loss_fn must be callable, got {loss_fn!r}", argument="loss_fn")
        self.on_nonfinite = on_nonfinite
        self.model, self.loss_fn, self.optimizer = model, loss_fn, optimizer
        self.steps, self.last_split, self.closed = 0, [], False
        self.skipped_batches = 0  # batches skipped for a non-finite loss (on_nonfinite="skip")
        self._monitors = Monitors()
        self._on_shutdown: list[Callable] = []
        self._group = None
        if scheduler is not None:
            from .distributed import DaskReplicaGroup
            self._buckets = BucketModules(bucket_model, [model])  # evaluate runs the model here
            self._group = DaskReplicaGroup(model, loss_fn, optimizer, scheduler,
                                           bucket_model=bucket_model)
            self.names, self.devices = list(self._group.names), [None] * len(self._group.names)
            self.replicas = []
        else:
            self.names, self.devices = as_devices(devices)
            self.replicas = replicate(model, self.devices)
            self._buckets = BucketModules(bucket_model, self.replicas)
            self._threads = ReplicaThreads(self.names)
            self._params = [list(r.parameters()) for r in self.replicas]
            self._reduce = GradientReducer(model, self.replicas)
            self._bn = BatchNormJoin(model, self.replicas) if len(self.replicas) > 1 else None
            self._skip = {n for n, _ in model.named_buffers()
                          if n.rsplit(".", 1)[0] in (self._bn.layers if self._bn else ())}
            # the model's own buffers move in its forward when it is replica 0
            self._own_buffers = list(model.buffers()) if self.replicas[0] is model else []
        try:
            self._loads = WorkLoads(self.names, work_load, balancer)
            self.balancer, self.work_load = self._loads.balancer, self._loads.work_load
        except BaseException:
            self.closed = True
            self._release()  # a refused work load must not leave replicas on the workers
            raise
        self._reporter = Reporter(self, self.names, self.devices, type(model).__name__)

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
    def interfaces(self) -> list[str]:
        """Per Dask replica: the network interface its process group uses (``[]`` in-process)."""
        return list(self._group.interfaces) if self._group is not None else []

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
            raise TrainingError("step trains, so it needs gradients, but it was called under "
                                "torch.no_grad() or torch.inference_mode(); use evaluate() to "
                                "compute without them", step=self.steps)
        key = check_key(bucket_key, self.steps)
        try:
            return self._step(x, y, key)
        except NonFiniteLossError as exc:
            exc.locate(step=self.steps)
            if self.on_nonfinite == "raise":
                raise
            self.skipped_batches += 1
            warn_skipped(exc, self.skipped_batches)
            return float("nan")

    def _step(self, x, y, key) -> float:
        """The step: split, run the replicas (locally or on workers), report."""
        __tracebackhide__ = True
        n = check_batch(x, y, self.steps)
        if len(self.names) == 1:
            active, counts = [0], [n]
        else:
            counts = shares(n, self._loads.shares(key))
            active = [i for i, c in enumerate(counts) if c > 0]  # a small batch skips devices
            counts = [counts[i] for i in active]
        starts = [sum(counts[:k]) for k in range(len(counts))]
        self.last_split = [slice(s, s + c) for s, c in zip(starts, counts)]
        wall = time.perf_counter()
        if self._group is not None:
            loss, spans, memories = self._group_step(x, y, active, counts, key)
        else:
            loss, spans = self._local_step(x, y, active, counts, key)
            memories = None
        wall = time.perf_counter() - wall
        self.steps += 1
        seconds = [e - s for s, e in spans]
        if self.balancer is not None:
            full = [0] * len(self.names)
            secs = [0.0] * len(self.names)
            for i, c, t in zip(active, counts, seconds):
                full[i], secs[i] = c, t
            self._loads.update(key, full, secs)
        self._reporter.step(active, counts, spans, self._loads.shares(key), loss, wall, memories,
                            key)
        return loss

    def _local_step(self, x, y, active, counts, key):
        """Replicas in threads, then reduce, step and broadcast."""
        __tracebackhide__ = True
        # built here, not in the threads: a bad bucket_model fails before any forward
        modules = [self._buckets.get(i, key, step=self.steps, device=self.names[i])
                   for i in active]
        weights = self._weights(counts)
        if self._bn:
            self._bn.start()
        whole = len(active) == 1  # no slicing: a view costs more than the step's bookkeeping
        calls = [(i, self._replica_call(i, m, x if whole else x[sl], y if whole else y[sl], c,
                                        key))
                 for i, m, sl, c in zip(active, modules, self.last_split, counts)]
        before = [b.detach().clone() for b in self._own_buffers]
        try:
            results = self._threads.run(calls)
            losses = [float(r[0]) for r in results]  # the one sync a replica a step
            bad = first_nonfinite(losses)
            if bad is not None:
                i = active[bad]
                raise NonFiniteLossError.of(losses[bad], i, self.names[i])
        except BaseException:
            self._undo(before)  # nothing of the failed step reaches the model
            raise
        model_only = len(active) == 1 and self.replicas[active[0]] is self.model
        if not model_only:
            self._reduce(active, weights)
            if self._bn:
                self._bn.join(active)
            average_buffers(self.model, [self.replicas[i] for i in active], weights, self._skip)
        self.optimizer.step()
        if len(self.replicas) > 1 or self.replicas[0] is not self.model:
            broadcast(self.model, self.replicas)
        loss = sum(w * v for w, v in zip(weights, losses))
        return loss, [r[1] for r in results]

    def _replica_call(self, i: int, module, x, y, rows: int, key):
        """Replica ``i``'s forward (through ``module``) and backward on its rows, for a thread."""
        device, params = self.devices[i], self._params[i]

        def run():
            start = time.time()
            t0 = time.perf_counter()
            with _on(device):
                for p in params:
                    p.grad = None
                xi, yi = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
                outputs = module(xi)
                loss = self.loss_fn(outputs, yi)
                check_loss(loss)
                loss.backward()
                if device.type == "cuda":  # the step time must include the GPU's work
                    torch.cuda.synchronize(device)
            seconds = time.perf_counter() - t0
            loss = loss.detach()
            if self._monitors:
                self._monitors(ReplicaStep(self.steps, i, self.names[i], rows, loss,
                                          outputs.detach(), seconds, key))
            return loss, (start, start + seconds)
        return run

    def _group_step(self, x, y, active, counts, key):
        """The step on Dask workers (every worker gets rows: see ``shares``)."""
        __tracebackhide__ = True
        full = [0] * len(self.names)
        for i, c in zip(active, counts):
            full[i] = c
        loss, stats = self._group.step(x, y, full, key)
        now = time.time()
        spans = [(now - stats[i]["seconds"], now) for i in active]
        return loss, spans, [stats[i].get("memory") for i in active]

    def _weights(self, counts: list[int]) -> list[float]:
        """Gradient weights: each replica's share of the rows (1 for a summed loss)."""
        if getattr(self.loss_fn, "reduction", "mean") == "sum":
            return [1.0] * len(counts)
        total = sum(counts)
        return [c / total for c in counts]

    @torch.no_grad()
    def _undo(self, before: list[torch.Tensor]) -> None:
        """Put every replica back as before a failed step: no gradients, the old buffers."""
        for replica in self.replicas:
            replica.zero_grad(set_to_none=True)
        for b, old in zip(self._own_buffers, before):
            b.copy_(old)
        if len(self.replicas) > 1 or self.replicas[0] is not self.model:
            broadcast(self.model, self.replicas)

    # -- monitors and events ----------------------------------------------------------

    def add_monitor(self, fn: Callable[[ReplicaStep], Any], devices=None) -> Callable[[], None]:
        """Call ``fn(ReplicaStep)`` after each replica's backward, in its thread.

        ``devices`` limits it to some device names; the record carries the
        step's ``bucket_key``.  An exception in ``fn`` fails the step like one in
        the replica (naming replica and device).  Returns a function that removes it.
        """
        return self._monitors.add(fn, devices)

    def on_shutdown(self, fn: Callable) -> None:
        """Call ``fn()`` when the trainer is closed (views stop then)."""
        self._on_shutdown.append(fn)

    # -- state -----------------------------------------------------------------------------

    def state_dict(self) -> dict:
        """The model's and the optimizer's state, and the work load (of each bucket too)."""
        if self._group is not None:
            state = self._group.state_dict()
        else:
            state = {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}
        # a snapshot: live tensors would change with the next step (and be shared on load)
        return copy.deepcopy(dict(state, shares=self.shares, steps=self.steps,
                                  bucket_shares=self.bucket_shares))

    def load_state_dict(self, state: dict) -> None:
        """Restore what :meth:`state_dict` returned, into the model and every replica."""
        self._check_open()
        if self._group is not None:
            self._group.load_state_dict(state)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.replicas:
            broadcast(self.model, self.replicas)
        self._loads.load(state.get("shares"), state.get("bucket_shares"))
        self.steps = state.get("steps", self.steps)

    def sync_model(self) -> torch.nn.Module:
        """The model with the trained parameters (fetched from the workers with a scheduler)."""
        if self._group is not None:
            self.model.load_state_dict(self._group.state_dict()["model"])
        return self.model

    def close(self) -> None:
        """Stop the replica threads (or tear down the worker group); idempotent.

        The model keeps the trained parameters.  With a scheduler they are
        fetched from the workers, from a surviving one after a lost worker; the
        group is torn down on every surviving worker whatever happened.
        """
        if self.closed:
            return
        self.closed = True
        try:
            if self._group is not None:
                self._fetch_last_state()
        finally:
            try:
                self._release()
            finally:
                for fn in self._on_shutdown:
                    fn()

    def _fetch_last_state(self) -> None:
        """Load the workers' parameters into the model, or warn that they are lost."""
        try:
            state = self._group.last_state()
        except Exception as exc:  # closing must tear down whatever the workers say
            state, why = None, f"could not fetch the trained parameters from the workers ({exc})"
        else:
            why = "no worker of the replica group survived"
        if state is None:
            warnings.warn(f"{why}: the model keeps the parameters of its last sync",
                          RuntimeWarning, stacklevel=4)
        else:
            self.model.load_state_dict(state["model"])

    def _release(self) -> None:
        """Stop the replica threads and hooks, or tear down the worker group."""
        if self._group is not None:
            self._group.close()
            return
        self._threads.close()
        if self._bn:
            self._bn.remove()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _check_open(self) -> None:
        if self.closed:
            raise TrainingError("the trainer is closed")

    def __repr__(self):
        shares_ = ", ".join(f"{n}: {s:.2f}" for n, s in zip(self.names, self.shares))
        return f"<DataParallelTrainer {type(self.model).__name__} on {shares_}; {self.steps} steps>"


def _on(device):
    """Make ``device`` current in this thread (CUDA), else nothing."""
    if device is not None and device.type == "cuda":
        return torch.cuda.device(device)
    return contextlib.nullcontext()
