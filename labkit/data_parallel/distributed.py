"""Replicas on Dask workers that reduce gradients with ``torch.distributed``.

:class:`DaskReplicaGroup` keeps one persistent replica (model, optimizer, loss)
per Dask worker; rank *i* lives on ``names[i]``.  Dask places, pins and watches
the tasks; ``torch.distributed`` (gloo on CPU, NCCL on GPU) moves the gradients.

* Worker-side state (:mod:`.replica_worker`) sits in the ``_GROUPS`` of each worker process,
  keyed by a group id, so later tasks pinned to that worker find their replica.
* Set-up runs in three rounds: a free port from the rank-0 worker; the replicas,
  built from one pickled payload (identical parameters everywhere, and a replica
  that cannot be built fails before anyone waits in a rendezvous); then
  ``init_process_group`` on every rank.
* A step first all-reduces one small vector: a "failed" flag, which parameters
  have a gradient, which floating buffers changed.  A rank whose forward or
  backward raised still joins that call, so no rank waits for gradients that
  will never come: all drop the step (buffers restored) and the client raises.
* Gradients, scaled by each rank's share of the rows, are summed in one flat
  buffer per dtype; every rank steps its own optimizer on identical gradients,
  so parameters stay identical without a broadcast.
* Collectives time out after ``timeout`` seconds on the workers; the client
  gives up on a rank whose worker left, or that lags its finished peers by more
  than ``timeout``.  A group that lost a collective is broken: close it.
"""

from __future__ import annotations

import asyncio
import copy
import os
import shutil
import tempfile
import time
import traceback
import uuid

import cloudpickle
import torch
from distributed.comm import get_address_host

from ..errors import (InputError, LabkitError, SchedulerError, TaskError, TrainingError,
                      WorkerLostError, for_caller)
from ..events import TaskInfo
from ..scheduling.connect import on_loopback, scheduler_identity
from ..scheduling.pickling import dumps
from . import replica_worker as w
from .guards import NonFiniteLossError
from .interfaces import check_reach

__all__ = ["DaskReplicaGroup"]

_SCATTER_BYTES = 2**20  # bigger shares of a batch go straight to their worker
# On workers of other hosts a share in the task graph crosses the network twice (client to
# scheduler, scheduler to worker): from this size on it goes straight to its worker.
_REMOTE_SCATTER_BYTES = 2**16
_GRACE = 10.0  # seconds the client waits beyond the workers' own timeout

# ---------------------------------------------------------------- client side

def _choose_workers(client, workers):
    """``(addresses in rank order, whether all are GPU workers)``."""
    info = scheduler_identity(client)["workers"]
    if not info:
        raise SchedulerError("the Dask cluster has no workers")
    gpu = {a for a, w in info.items() if w.get("resources", {}).get("GPU", 0) > 0}
    names = sorted(gpu or info) if workers is None else list(workers)
    for a in names:
        if a not in info:
            raise InputError(f"not a worker of this cluster: {a!r}", device=a)
    if len(set(names)) != len(names) or not names:
        raise InputError(f"workers must be distinct and at least one: {names}")
    return names, all(a in gpu for a in names)


def _wait_all(futures, timeout: float) -> None:
    """Wait until every future is done, on the futures' own client; TimeoutError if not.

    ``distributed.wait`` uses the process's default client, the newest one: with a
    second client open (a second scheduler), it never saw the steps end before its
    timeout, and every step took a second.
    """
    deadline = time.monotonic() + timeout
    for f in futures:
        if not f.done():
            f.exception(timeout=max(1e-3, deadline - time.monotonic()))


def _payload(model, loss_fn, optimizer, bucket_model=None) -> bytes:
    """One pickle of what a replica needs; the optimizer (bound to our parameters) described.

    One pickle, so objects the parts share stay shared; when it fails, the
    parts are tried alone to name the one that cannot be sent (``loss_fn``...)
    in an ``InputError``, instead of Dask's TypeError.
    """
    index = {id(p): k for k, p in enumerate(model.parameters())}
    try:
        groups = [[index[id(p)] for p in g["params"]] for g in optimizer.param_groups]
    except KeyError:
        raise InputError("the optimizer holds a parameter that is not the model's",
                         argument="optimizer") from None
    on_cpu = all(t.device.type == "cpu" for t in [*model.parameters(), *model.buffers()])
    shipped = model if on_cpu else copy.deepcopy(model).cpu()  # workers may have no GPU
    parts = {"model": shipped, "loss_fn": loss_fn,
             "optimizer": (type(optimizer), dict(optimizer.defaults), groups,
                           w.to_cpu(optimizer.state_dict())),
             "bucket_model": bucket_model}
    try:
        return cloudpickle.dumps(parts)
    except Exception:
        for name, part in parts.items():
            dumps(part, name)   # raises naming the first part that cannot be pickled
        raise


def _client_error(future, rank, name) -> LabkitError:
    exc = future.exception()
    if isinstance(exc, LabkitError):
        return exc.locate(replica=rank, device=name)
    tb = future.traceback()
    text = "".join(traceback.format_tb(tb)) if tb is not None else None
    return TaskError.from_exception(exc, text, replica=rank, device=name)


class DaskReplicaGroup:
    """One persistent torch replica per Dask worker, reducing gradients with torch.distributed.

    Parameters
    ----------
    model : torch.nn.Module
        Copied to every worker; steps do not change it (see :meth:`state_dict`).
    loss_fn : callable
        ``loss_fn(output, y)``: a mean over rows unless its ``reduction`` is ``"sum"``.
    optimizer : torch.optim.Optimizer
        Over ``model``'s parameters; rebuilt on each worker from its type,
        defaults, parameter groups and state.
    scheduler : labkit.DaskScheduler
        Its ``client`` runs the tasks.
    workers : list of str, optional
        Worker addresses in rank order; by default all workers (those with a
        ``GPU`` resource, if any has one), sorted.
    backend : str, optional
        ``"nccl"`` on GPU workers, else ``"gloo"``; ``"gloo"`` keeps replicas on the CPU.
    timeout : float
        Seconds a rank waits for its peers in the rendezvous or a collective.
    rendezvous : {"auto", "tcp", "file"}
        How ranks meet: ``"auto"`` uses a file when every worker is on
        loopback (no socket open to the network), else torch's TCP store.
    bucket_model : callable, optional
        ``bucket_model(model, key)``: shipped to the workers, where each
        replica builds (and keeps) the module of a bucket key on first use.
    """

    def __init__(self, model, loss_fn, optimizer, scheduler, workers=None, backend=None,
                 timeout=60.0, rendezvous="auto", bucket_model=None):
        if rendezvous not in ("auto", "tcp", "file"):
            raise InputError(f"rendezvous must be 'auto', 'tcp' or 'file', got {rendezvous!r}")
        if getattr(scheduler, "in_process", False):
            raise InputError(
                "data-parallel replicas on Dask need worker processes (one torch.distributed "
                f"rank each), but this DaskScheduler runs tasks on threads (mode "
                f"{scheduler.mode!r}): use lk.DaskScheduler(mode='processes') or an existing "
                "cluster, or train in-process with devices=[...]")
        self.rendezvous = rendezvous
        self._client, self._gid = scheduler.client, uuid.uuid4().hex
        self._scheduler = scheduler
        # The replicas' tasks go through a batch of the scheduler, so that cancelling
        # or shutting down the scheduler reaches them as it reaches every other task.
        self._batch = scheduler.batch(info=TaskInfo(f"replicas-{self._gid[:8]}", -1, -1))
        self._closed, self._broken = False, None
        self.timeout = float(timeout)
        self.names, gpu = _choose_workers(self._client, workers)
        self.backend = backend or ("nccl" if gpu else "gloo")
        self._sum = getattr(loss_fn, "reduction", "mean") == "sum"
        payload = _payload(model, loss_fn, optimizer, bucket_model)
        hosts = [get_address_host(a) for a in self.names]
        self._local = on_loopback(self.names)
        self._scatter_bytes = _SCATTER_BYTES if self._local else _REMOTE_SCATTER_BYTES
        # the k-th chosen worker on a host takes that host's k-th GPU
        local = [hosts[:r].count(h) if gpu and self.backend != "gloo" else None
                 for r, h in enumerate(hosts)]
        self._store_dir, self.interfaces = None, []
        try:
            url = self._rendezvous(hosts)
            ranks = range(len(self.names))
            self._run([self._submit(r, w.build, self._gid, r, self.names[r], payload, local[r])
                       for r in ranks], "set-up")
            # ranks that cannot reach each other fail here in seconds, not at the timeout
            check_reach(self, hosts, hosts[0] if url.startswith("tcp://") else None)
            #: per rank, the interface its process group uses and how it was chosen
            self.interfaces = self._run([self._submit(r, w.join, self._gid, r, len(ranks), url,
                                                      self.backend, self.timeout, hosts[r])
                                         for r in ranks], "set-up")
        except BaseException:
            self.close()
            raise

    def _rendezvous(self, hosts) -> str:
        """Where the ranks meet: a file when every worker is on this machine's loopback.

        torch's TCP store listens on every interface whatever host it is given,
        so a cluster on 127.0.0.1 (the embedded one) meets through a file in a
        private temporary folder instead and opens no socket beyond loopback.
        """
        if self.rendezvous == "file" or (self.rendezvous == "auto" and self._local):
            self._store_dir = tempfile.mkdtemp(prefix="labkit-dist-")
            return "file://" + os.path.join(self._store_dir, "store")
        port = self._run([self._submit(0, w.free_port, hosts[0])], "set-up")[0]
        return f"tcp://[{hosts[0]}]:{port}" if ":" in hosts[0] else f"tcp://{hosts[0]}:{port}"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _submit(self, rank, fn, *args):
        # a labkit key: workers do not log these tasks' failures (see scheduling.quiet),
        # the client raises them once, located
        key = f"labkit-replica-{fn.__name__}-{self._gid[:8]}-{rank}-{uuid.uuid4().hex[:8]}"
        return self._client.submit(fn, *args, workers=[self.names[rank]], key=key,
                                   allow_other_workers=False, pure=False)

    def _ship(self, rank, t):
        """A copy of ``t`` (a view would pickle its whole storage), scattered if big."""
        if t is None:
            return None
        t = t.detach().clone()
        if t.element_size() * t.numel() < self._scatter_bytes:
            return t
        return self._client.scatter(t, workers=[self.names[rank]], hash=False, direct=True)

    def _run(self, futures, what, collective=False, ranks=None):
        """Results of one task per rank (``ranks``), or the first rank's error; never hangs."""
        __tracebackhide__ = True
        ranks = list(range(len(futures)) if ranks is None else ranks)
        names = [self.names[r] for r in ranks]
        first_done = None
        self._batch.track(futures)
        try:
            while True:
                try:
                    _wait_all(futures, timeout=1.0)
                    self._check_batch(what, collective)
                    break
                except (TimeoutError, asyncio.TimeoutError):  # distinct before Python 3.11
                    self._check_batch(what, collective)
                except LabkitError:
                    raise
                except Exception as exc:  # Dask's FuturesCancelledError: whose cancel was it?
                    self._check_batch(what, collective)
                    if collective:
                        self._broken = f"a {what} was cancelled"
                    raise SchedulerError(f"{what} tasks were cancelled outside labkit: "
                                         f"{type(exc).__name__}") from exc
                alive = scheduler_identity(self._client)["workers"]
                stuck = [a for a, f in zip(names, futures) if not f.done()]
                self._check_lost(what, collective, ranks, stuck, alive)
                first_done = first_done or (len(stuck) < len(futures) and time.monotonic())
                if first_done and time.monotonic() - first_done > self.timeout + _GRACE:
                    if collective:
                        self._broken = f"a {what} did not finish"
                    raise SchedulerError(f"{what} did not finish: a worker hangs",
                                         device=", ".join(stuck))
            if any(f.status == "error" for f in futures):  # a peer's death fails the others
                self._check_lost(what, collective, ranks, names,
                                 scheduler_identity(self._client)["workers"])
            for rank, name, f in zip(ranks, names, futures):
                if f.status == "error":
                    if collective:
                        self._broken = f"a {what} failed"
                    raise for_caller(_client_error(f, rank, name))
            return [f.result() for f in futures]
        finally:
            self._batch.untrack(futures)
            pending = [f for f in futures if not f.done()]
            if pending:  # nobody waits for them any more
                self._client.cancel(pending)

    def _check_lost(self, what, collective, ranks, candidates, alive) -> None:
        """Raise a WorkerLostError naming the first rank among ``candidates`` whose worker left."""
        for rank in ranks:
            name = self.names[rank]
            if name in candidates and name not in alive:
                if collective:
                    self._broken = f"the worker of replica {rank} was lost"
                raise WorkerLostError(
                    f"the worker of replica {rank} was lost during a {what}; the replica group "
                    "is broken: close the trainer (it tears the group down) and start a new "
                    "one once the cluster has its workers back", replica=rank, worker=name)

    def _check_batch(self, what, collective) -> None:
        """Raise the scheduler's cancel or shutdown here; a cut collective breaks the group."""
        try:
            self._batch.check()
        except LabkitError:
            if collective:
                self._broken = f"a {what} was cancelled"
            raise

    def _shares(self, x, y, counts):
        """``(counts, row spans)``, checked against the batch."""
        counts = [int(c) for c in counts]
        if len(counts) != len(self.names):
            raise InputError(f"{len(counts)} counts for {len(self.names)} replicas")
        if min(counts) < 0 or sum(counts) != len(x) or not len(x):
            raise InputError(f"counts {counts} do not split a batch of {len(x)} rows")
        if y is not None and len(y) != len(x):
            raise InputError(f"x has {len(x)} rows but y has {len(y)}")
        ends = [sum(counts[:i + 1]) for i in range(len(counts))]
        return counts, [(e - c, e) for c, e in zip(counts, ends)]

    @property
    def broken(self) -> str | None:
        """Why the group is broken (a collective failed or a worker was lost), else None."""
        return self._broken

    def _check_open(self):
        if self._scheduler.closed or self._client.status in ("closing", "closed"):
            raise SchedulerError("the scheduler of this trainer was shut down (or its Dask "
                                 "client closed): the replicas are gone; open a new "
                                 "scheduler and a new trainer")
        if self._closed:
            raise TrainingError("the replica group is closed")
        if self._broken:
            raise TrainingError(f"the replica group is broken ({self._broken}); close it")

    def step(self, x, y, counts, bucket_key=None):
        """One optimizer step on the batch ``(x, y)``; rank *i* takes the next ``counts[i]`` rows.

        ``bucket_key`` makes every rank run its module of that bucket.

        Returns
        -------
        loss : float
            The batch's loss: the rows-weighted mean of the ranks' (their sum
            for a ``reduction="sum"`` loss).
        stats : list of dict
            Per rank: ``rows``, ``seconds`` (forward and backward) and
            ``memory`` (peak CUDA bytes; ``None`` on CPU).
        """
        __tracebackhide__ = True
        self._check_open()
        counts, spans = self._shares(x, y, counts)
        total = sum(counts)
        weights = [1.0 if self._sum else c / total for c in counts]
        futures = [self._submit(r, w.step, self._gid, r, self._ship(r, x[a:b]),
                                None if y is None else self._ship(r, y[a:b]), weights[r],
                                counts[r] / total, bucket_key) for r, (a, b) in enumerate(spans)]
        results = self._run(futures, "step", collective=True)
        errors = [res["error"] for res in results if res["failed"] and res["error"] is not None]
        if errors:
            raise for_caller(errors[0])
        bad = next((r for r, res in enumerate(results) if res.get("nonfinite")), None)
        if bad is not None:  # every rank undid the step
            raise NonFiniteLossError.of(results[bad]["loss"], bad, self.names[bad])
        if any(res["failed"] for res in results):
            raise SchedulerError("a replica reported a failure without its error")
        loss = sum(w * res["loss"] for w, res in zip(weights, results))
        return float(loss), [{"rows": c, "seconds": res["seconds"], "memory": res["memory"]}
                             for c, res in zip(counts, results)]

    def evaluate(self, x, y, counts, metrics=None, bucket_key=None):
        """``{"loss": ..., name: ...}`` in eval mode, weighted by rows like :meth:`step`.

        ``metrics`` maps names to ``f(output, y)``, a mean over the rows it is given.
        """
        __tracebackhide__ = True
        self._check_open()
        counts, spans = self._shares(x, y, counts)
        ranks = [r for r, c in enumerate(counts) if c]
        futures = [self._submit(r, w.evaluate, self._gid, r, self._ship(r, x[slice(*spans[r])]),
                                None if y is None else self._ship(r, y[slice(*spans[r])]),
                                dict(metrics or {}), bucket_key) for r in ranks]
        results = self._run(futures, "evaluation", ranks=ranks)
        total = sum(counts)
        return {key: float(sum((1.0 if key == "loss" and self._sum else counts[r] / total)
                               * res[key] for r, res in zip(ranks, results)))
                for key in results[0]}

    def state_dict(self):
        """``{"model": ..., "optimizer": ...}`` of rank 0, as CPU tensors."""
        self._check_open()
        return self._run([self._submit(0, w.get_state, self._gid)], "state_dict")[0]

    def load_state_dict(self, state):
        """Load a :meth:`state_dict`-shaped mapping into every rank."""
        self._check_open()
        [shared] = self._client.scatter([state], workers=self.names, broadcast=True, hash=False)
        self._run([self._submit(r, w.set_state, self._gid, r, shared)
                   for r in range(len(self.names))], "load_state_dict")

    def last_state(self):
        """Like :meth:`state_dict`, from the first rank whose worker is alive, even when broken.

        A broken group's ranks undid the failed step, so a survivor holds the
        state after the last step that succeeded.  Read beside the task threads
        (``client.run``), so it never waits behind a stuck task.  None when no
        rank survived.
        """
        if self._closed:
            raise TrainingError("the replica group is closed")
        if not self._broken:
            return self.state_dict()
        alive = scheduler_identity(self._client)["workers"]
        for name in [a for a in self.names if a in alive]:
            try:
                return self._client.run(w.get_state, self._gid, workers=[name])[name]
            except Exception:  # that worker left too, or lost the replica: try the next
                continue
        return None

    def close(self):
        """Destroy the process group and drop the replicas on every surviving worker; idempotent.

        Never raises: a lost worker took its rank with it, and the others are
        torn down (their ``torch.distributed`` group destroyed) whatever happened.
        """
        if self._closed:
            return
        self._closed = True
        try:
            alive = scheduler_identity(self._client)["workers"]
            self._client.run(w.teardown, self._gid, on_error="ignore",
                             workers=[a for a in self.names if a in alive])
        except Exception:  # a closed client leaves nothing to tear down
            pass
        finally:
            if self._store_dir is not None:
                shutil.rmtree(self._store_dir, ignore_errors=True)
            try:
                self._batch.close()
            except Exception:  # the scheduler was shut down first: nothing left to release
                pass
