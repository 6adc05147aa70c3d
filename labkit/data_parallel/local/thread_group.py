"""Replicas on devices of this process, one thread each: the in-process replica group.

After ``torch.nn.DataParallel``, a step is four named steps: *split* the batch
by the planned counts (:meth:`ThreadGroup._split`), one persistent replica per
device (*replicate*, :mod:`.replicate`), forward and backward side by side
(*apply*, :mod:`.parallel_apply`), gradients *reduced* into the model weighted
by each device's share (:mod:`.reduce`), the optimizer stepped once and the
parameters broadcast back.  It keeps the contract of every replica group
(:class:`~labkit.data_parallel.replica_group.ReplicaGroup`), as the Dask group
does: ``steps`` of planned batches reported as
:class:`~labkit.data_parallel.reports.StepReport` s, ``evaluate``, state,
monitors, ``close``, so that the trainer has no branch per backend.  It keeps
none of the capabilities of a group on workers (no epochs or data of its own):
every batch comes through the client.
"""

from __future__ import annotations

import contextlib
import functools
import math
import time
import uuid
import weakref
from collections.abc import Callable, Iterable
from typing import Any

import torch

from ...errors import LabkitError, SchedulerError, TrainingError
from ...events import TaskInfo
from ..batchnorm import BatchNormJoin
from ..bucketing import BucketModules
from ..devices import as_devices, default_devices, memory
from ..fit_data import PlannedStep
from ..guards import NonFiniteLossError, check_loss, first_nonfinite
from ..monitors import Monitors, ReplicaStep
from ..reports import StepReport, batch_number, step_number
from ..split import row_weights
from .parallel_apply import ReplicaThreads
from .reduce import GradientReducer, average_buffers
from .replicate import broadcast, replicate

__all__ = ["ThreadGroup", "SchedulerThreadGroup", "thread_devices"]


class ThreadGroup:
    """One replica of ``model`` per device of ``devices``, on a thread each."""

    #: The model is replica 0 or the target of the reduce: it is trained in place.
    holds_model = True
    #: No scheduler holds these replicas, and no Dask client (see SchedulerThreadGroup).
    scheduler: Any = None
    client: Any = None

    def __init__(self, model, loss_fn, optimizer, devices=None, bucket_model=None):
        self.model, self.loss_fn, self.optimizer = model, loss_fn, optimizer
        self.names, self.devices = as_devices(devices)
        self.replicas = replicate(model, self.devices)
        self.buckets = BucketModules(bucket_model, self.replicas)
        self.monitors = Monitors()
        self._threads = ReplicaThreads(self.names)
        self._params = [list(r.parameters()) for r in self.replicas]
        self._reduce = GradientReducer(model, self.replicas)
        self._bn = BatchNormJoin(model, self.replicas) if len(self.replicas) > 1 else None
        self._skip = {
            n
            for n, _ in model.named_buffers()
            if n.rsplit(".", 1)[0] in (self._bn.layers if self._bn else ())
        }
        # the model's own buffers move in its forward when it is replica 0
        self._own_buffers = list(model.buffers()) if self.replicas[0] is model else []
        self.sum_loss = getattr(loss_fn, "reduction", "mean") == "sum"
        self.interfaces: list[str] = []  # no process group: the replicas share this process
        self.closed = False

    def check_open(self) -> None:
        """Raise when the group is closed."""
        if self.closed:
            raise TrainingError("the trainer is closed")

    def stop_reason(self) -> None:
        """None: no one stops replicas on threads with a reason of their own."""
        return None

    # -- steps ----------------------------------------------------------------------------

    def steps(
        self,
        planned: Iterable[PlannedStep],
        done: Callable[[StepReport], None],
        check: Callable[[], None] | None = None,
        policy: str = "raise",
    ) -> None:
        """Train each planned step; ``done(report)`` after each."""
        __tracebackhide__ = True
        for step in planned:
            if check is not None:
                check()
            done(self._step(step, policy))

    def _step(self, planned: PlannedStep, policy: str) -> StepReport:
        """One step, as named steps: split the batch, apply the replicas, reduce, step once."""
        __tracebackhide__ = True
        active = [i for i, c in enumerate(planned.counts) if c > 0]  # a small batch skips devices
        counts = [planned.counts[i] for i in active]
        where = {"epoch": planned.epoch, "batch": batch_number(planned.batch)}
        calls = self._split(planned, active, counts, where)
        before = [b.detach().clone() for b in self._own_buffers]
        started = time.perf_counter()
        try:
            results = self._threads.run(calls)
            losses = [float(r[0]) for r in results]  # the one sync a replica a step
        except BaseException as exc:
            self._undo(before)  # nothing of the failed step reaches the model
            if isinstance(exc, LabkitError):
                exc.locate(**where)
            raise
        bad = first_nonfinite(losses)
        if bad is not None:
            self._undo(before)
            error = NonFiniteLossError.of(losses[bad], active[bad], self.names[active[bad]])
            if policy == "raise":
                raise error.locate(**where)
            seconds = [0.0] * len(active)
            wall = time.perf_counter() - started
            return self._report(planned, active, counts, seconds, math.nan, wall, losses, True)
        weights = self._weights(counts)
        self._reduce_and_step(active, weights)
        loss = sum(w * v for w, v in zip(weights, losses, strict=True))
        seconds = [r[1] for r in results]
        wall = time.perf_counter() - started
        return self._report(planned, active, counts, seconds, loss, wall, losses)

    def _split(self, planned: PlannedStep, active: list, counts: list, where: dict) -> list:
        """Split: each active replica's call on its rows of the batch, through its module."""
        key = planned.key
        modules = [
            self.buckets.get(
                i, key, device=self.names[i], step=step_number(planned.number), **where
            )
            for i in active
        ]
        if self._bn:
            self._bn.start()
        whole = len(active) == 1  # no slicing: a view costs more than the step's bookkeeping
        starts = [sum(counts[:k]) for k in range(len(counts))]
        return [
            (
                i,
                self._replica_call(
                    i,
                    m,
                    planned.x if whole else planned.x[s : s + c],
                    planned.y if whole else planned.y[s : s + c],
                    c,
                    key,
                    planned.number,
                ),
            )
            for i, m, s, c in zip(active, modules, starts, counts, strict=True)
        ]

    def _reduce_and_step(self, active: list, weights: list) -> None:
        """Reduce into the model, step the optimizer once, broadcast back."""
        model_only = len(active) == 1 and self.replicas[active[0]] is self.model
        if not model_only:
            self._reduce(active, weights)
            if self._bn:
                self._bn.join(active)
            average_buffers(self.model, [self.replicas[i] for i in active], weights, self._skip)
        self.optimizer.step()
        if len(self.replicas) > 1 or self.replicas[0] is not self.model:
            broadcast(self.model, self.replicas)

    def _report(self, planned, active, counts, seconds, loss, wall, losses, skipped=False):
        rows, secs, own = [0] * len(self.names), [0.0] * len(self.names), [0.0] * len(self.names)
        for i, c, t, v in zip(active, counts, seconds, losses, strict=True):
            rows[i], secs[i], own[i] = c, t, v
        total = max(sum(planned.counts), 1)
        return StepReport(
            planned.epoch if planned.epoch is not None else -1,
            planned.batch if planned.batch is not None else -1,
            loss,
            tuple(rows),
            tuple(secs),
            wall,
            time.time(),
            skipped=skipped,
            key=planned.key,
            shares=tuple(c / total for c in planned.counts),
            losses=tuple(own),
        )

    def _replica_call(self, i: int, module, x, y, rows: int, key, number=None):
        """Replica ``i``'s forward (through ``module``) and backward on its rows, for a thread."""
        device, params = self.devices[i], self._params[i]

        def run():
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
            if self.monitors:
                self.monitors(
                    ReplicaStep(
                        number, i, self.names[i], rows, loss, outputs.detach(), seconds, key
                    )
                )
            return loss, seconds

        return run

    def _weights(self, counts: list[int]) -> list[float]:
        """Gradient weights: each replica's share of the rows (1 for a summed loss)."""
        return row_weights(counts, self.sum_loss)

    @torch.no_grad()
    def _undo(self, before: list[torch.Tensor]) -> None:
        """Put every replica back as before a failed step: no gradients, the old buffers."""
        for replica in self.replicas:
            replica.zero_grad(set_to_none=True)
        for b, old in zip(self._own_buffers, before, strict=True):
            b.copy_(old)
        if len(self.replicas) > 1 or self.replicas[0] is not self.model:
            broadcast(self.model, self.replicas)

    # -- evaluation and state ----------------------------------------------------------------

    def evaluate(self, x, y, counts, metrics=None, bucket_key=None) -> dict:
        """Row-weighted means of the loss and ``metrics`` on ``(x, y)``, split by ``counts``."""
        fns = {"loss": self.loss_fn, **dict(metrics or {})}
        calls, start = [], 0
        for i, c in enumerate(counts):
            if c:
                module = self.buckets.get(i, bucket_key, device=self.names[i])
                calls.append(
                    (
                        i,
                        _evaluator(
                            module, self.devices[i], x[start : start + c], y[start : start + c], fns
                        ),
                    )
                )
            start += c
        modes = [r.training for r in self.replicas]
        for r in self.replicas:
            r.eval()
        try:
            results = self._threads.run(calls)
        finally:
            for r, mode in zip(self.replicas, modes, strict=True):
                r.train(mode)
        total = max(sum(counts), 1)
        return {name: sum(r[name] for r in results) / total for name in fns}

    def memory(self, index: int) -> tuple[int | None, int | None]:
        """``(bytes in use, limit)`` of device ``index``."""
        return memory(self.devices[index])

    def set_monitors(self, monitors) -> None:
        """Call ``monitors`` after each replica's backward, in its thread."""
        self.monitors = monitors

    def state_dict(self) -> dict:
        """The model's and the optimizer's state (live: the trainer copies it)."""
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        """Load ``state`` into the model and optimizer, and every replica."""
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        broadcast(self.model, self.replicas)

    def fetch_state(self) -> dict:
        """The model's own state (live): it holds what the replicas trained."""
        return self.state_dict()

    def last_state(self) -> dict:
        """The state at close: the model's own (it is replica 0 or the reduce target)."""
        return self.state_dict()

    def close(self) -> None:
        """Stop the replica threads and hooks; idempotent."""
        if self.closed:
            return
        self.closed = True
        self._threads.close()
        if self._bn:
            self._bn.remove()


def _evaluator(model, device, x, y, fns):
    """A call computing row-weighted metric sums of ``model`` on ``(x, y)``."""

    def run():
        with torch.no_grad():
            out = model(x.to(device))
            yd = y.to(device)
            return {name: float(fn(out, yd)) * len(x) for name, fn in fns.items()}

    return run


def _on(device):
    """Make ``device`` current in this thread (CUDA), else nothing."""
    if device is not None and device.type == "cuda":
        return torch.cuda.device(device)
    return contextlib.nullcontext()


class SchedulerThreadGroup(ThreadGroup):
    """Thread replicas that belong to an in-process ``DaskScheduler`` (``"auto"``, ``"threads"``).

    On the embedded cluster's threads a replica per worker thread (every GPU
    instead, where there are GPUs) trains in this process: on the notebooks'
    models that ran 4-8 times as many samples a second as replicas in worker
    processes, and it starts nothing (``benchmarks/RESULTS.md``, issue 38).
    The replicas answer to the scheduler as its tasks do: its ``cancel()``
    stops a fit after the current step, its ``shutdown()`` ends the fit and
    the replica threads, and a shut-down scheduler's trainer says so.
    """

    def __init__(self, model, loss_fn, optimizer, scheduler, devices=None, bucket_model=None):
        self.scheduler = scheduler
        # a batch of the scheduler: its cancel and its shutdown reach the fit (see steps);
        # taken first, so that a shut-down scheduler refuses before any thread starts
        self._batch = scheduler.batch(info=TaskInfo(f"replicas-{uuid.uuid4().hex[:8]}", -1, -1))
        try:
            if devices is None:
                devices = thread_devices(scheduler)
            super().__init__(model, loss_fn, optimizer, devices, bucket_model)
        except BaseException:
            self._batch.close()
            raise
        # a weak reference: the scheduler must not keep every closed trainer's replicas alive
        scheduler.on_shutdown(functools.partial(_scheduler_ended, weakref.ref(self)))

    def end_threads(self) -> None:
        """End the replica threads (the scheduler shut down); the group cannot step again."""
        self._threads.close()

    def check_open(self) -> None:
        """Raise when the group is closed or its scheduler shut down."""
        if self.scheduler.closed:
            raise SchedulerError(
                "the scheduler of this trainer was shut down: its replica threads are "
                "gone; open a new scheduler and a new trainer"
            )
        super().check_open()

    def steps(
        self,
        planned: Iterable[PlannedStep],
        done: Callable[[StepReport], None],
        check: Callable[[], None] | None = None,
        policy: str = "raise",
    ) -> None:
        """Train each planned step, raising the scheduler's cancel or shutdown between steps."""
        __tracebackhide__ = True

        def checked():
            self._batch.check()
            if check is not None:
                check()

        self.check_open()
        super().steps(planned, done, checked, policy)

    def close(self) -> None:
        """Stop the replica threads and leave the scheduler; idempotent."""
        if self.closed:
            return
        super().close()
        # the scheduler may have shut down first: nothing left to release then
        with contextlib.suppress(Exception):
            self._batch.close()


def _scheduler_ended(group_ref) -> None:
    """The scheduler shut down: the replica threads of its group (if still alive) end."""
    group = group_ref()
    if group is not None:
        group.end_threads()


def thread_devices(scheduler) -> list[str]:
    """Every GPU, else one CPU replica per thread of the scheduler's in-process worker."""
    if torch.cuda.is_available():
        return default_devices()
    threads = sum(scheduler.client.nthreads().values()) or 1
    return [f"cpu:{i}" for i in range(threads)] if threads > 1 else ["cpu"]
