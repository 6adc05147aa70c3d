"""Replicas on Dask workers that reduce gradients with ``torch.distributed``.

:class:`DaskReplicaGroup` keeps one persistent replica (model, optimizer, loss)
per Dask worker; rank *i* lives on ``names[i]``.  Dask places, pins and watches
the tasks; each group has a process group of its own (gloo on CPU, NCCL on
GPUs, see :mod:`.groups`), so several trainers share a cluster.

* Set-up: the replicas are built from one pickled payload (identical
  parameters everywhere; a replica that cannot be built fails before anyone
  waits in a rendezvous), ranks that cannot reach each other are found in
  seconds (:mod:`.interfaces`), then every rank joins the process group.
* Training runs in loops on the workers (:mod:`.rank_tasks`): a whole epoch
  over the rows each rank holds (:mod:`.dask_epochs`), or commands of several
  client-fed steps sent ahead (:mod:`.dask_steps`).  Gradients are reduced
  during backward (:mod:`.overlap`) and the ranks agree on every step
  (:mod:`.rank`); rank 0 streams the step reports (:mod:`.reports`).
* A lost worker: an epoch loop re-forms the group on the workers left and
  goes on from the last commit (:mod:`.dask_epochs`); elsewhere a
  :class:`~labkit.errors.WorkerLostError` names the worker.  The client gives
  up on a rank whose worker left, or that lags its finished peers by more
  than ``timeout``.  A group that lost a collective is broken: close it.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import os
import queue
import shutil
import tempfile
import threading
import time
import traceback
import uuid

import cloudpickle
from distributed.comm import get_address_host

from ...errors import (
    InputError,
    LabkitError,
    SchedulerError,
    TaskError,
    TrainingError,
    WorkerLostError,
    for_caller,
)
from ...events import TaskInfo
from ...scheduling.connect import on_loopback, scheduler_identity
from ...scheduling.pickling import dumps
from ...scheduling.shared import SharedChunks
from .. import rank_tasks as w
from ..interfaces import check_reach
from ..split import row_weights

__all__ = ["DaskReplicaGroup"]

_GRACE = 10.0  # seconds the client waits beyond the workers' own timeout


def _choose_workers(client, workers):
    """``(addresses in rank order, whether all are GPU workers)``."""
    info = scheduler_identity(client)["workers"]
    if not info:
        raise SchedulerError("the Dask cluster has no workers")
    gpu = {a for a, w_ in info.items() if w_.get("resources", {}).get("GPU", 0) > 0}
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
    second client open it never saw the steps end before its timeout.
    """
    deadline = time.monotonic() + timeout
    for f in futures:
        if not f.done():
            f.exception(timeout=max(1e-3, deadline - time.monotonic()))


def _payload(model, loss_fn, optimizer, bucket_model=None) -> bytes:
    """One pickle of what a replica needs; the optimizer (bound to our parameters) described.

    One pickle, so objects the parts share stay shared; when it fails, the
    parts are tried alone to name the one that cannot be sent (``loss_fn``...).
    """
    index = {id(p): k for k, p in enumerate(model.parameters())}
    try:
        groups = [[index[id(p)] for p in g["params"]] for g in optimizer.param_groups]
    except KeyError:
        raise InputError(
            "the optimizer holds a parameter that is not the model's", argument="optimizer"
        ) from None
    on_cpu = all(t.device.type == "cpu" for t in [*model.parameters(), *model.buffers()])
    shipped = model if on_cpu else copy.deepcopy(model).cpu()  # workers may have no GPU
    parts = {
        "model": shipped,
        "loss_fn": loss_fn,
        "optimizer": (
            type(optimizer),
            dict(optimizer.defaults),
            groups,
            w.to_cpu(optimizer.state_dict()),
        ),
        "bucket_model": bucket_model,
    }
    try:
        return cloudpickle.dumps(parts)
    except Exception:
        for name, part in parts.items():
            dumps(part, name)  # raises naming the first part that cannot be pickled
        raise


def _client_error(future, rank, name) -> LabkitError:
    exc = future.exception()
    if isinstance(exc, LabkitError):
        return exc.locate(replica=rank, device=name)
    tb = future.traceback()
    text = "".join(traceback.format_tb(tb)) if tb is not None else None
    return TaskError.from_exception(exc, text, what=f"replica {rank}", replica=rank, device=name)


class DaskReplicaGroup:
    """One persistent torch replica per Dask worker, reducing gradients with torch.distributed.

    Parameters
    ----------
    model : torch.nn.Module
        Copied to every worker; training does not change it (see :meth:`state_dict`).
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

    #: Fits run their epochs as loops on the workers, over data that lives there.
    runs_epochs = True

    def __init__(
        self,
        model,
        loss_fn,
        optimizer,
        scheduler,
        workers=None,
        backend=None,
        timeout=60.0,
        rendezvous="auto",
        bucket_model=None,
    ):
        if rendezvous not in ("auto", "tcp", "file"):
            raise InputError(
                f"rendezvous must be 'auto', 'tcp' or 'file', got {rendezvous!r}",
                argument="rendezvous",
            )
        if getattr(scheduler, "in_process", False):
            raise InputError(
                "data-parallel replicas on Dask need worker processes (one torch.distributed "
                f"rank each), but this DaskScheduler runs tasks on threads (mode "
                f"{scheduler.mode!r}): use lk.DaskScheduler(mode='processes') or an existing "
                "cluster, or train in-process with devices=[...]"
            )
        self.rendezvous = rendezvous
        self._client, self._gid, self._scheduler = scheduler.client, uuid.uuid4().hex, scheduler
        # The replicas' tasks go through a batch of the scheduler, so that cancelling
        # or shutting down the scheduler reaches them as it reaches every other task.
        self._batch = scheduler.batch(info=TaskInfo(f"replicas-{self._gid[:8]}", -1, -1))
        self._closed, self._broken, self.generation = False, None, 0
        self._calls = threading.local()  # the futures a call issued (see .call), per thread
        self.timeout = float(timeout)
        self.names, gpu = _choose_workers(self._client, workers)
        self.backend = backend or ("nccl" if gpu else "gloo")
        self.sum_loss = getattr(loss_fn, "reduction", "mean") == "sum"
        self._store_dirs: list[str] = []
        self.interfaces, self.devices = [], []
        #: the median step time of the last client-fed command (see .dask_steps)
        self.step_seconds: float | None = None
        #: reports streamed by rank 0 (see .reports), and completions of long tasks
        self.topic, self.inbox = f"labkit-fit-{self._gid[:12]}", queue.SimpleQueue()
        #: client-fed steps' shares in shared memory, where the scheduler sends chunks so
        #: (worker processes of this machine); None: they travel through sockets
        self.segments = SharedChunks() if scheduler.route("shared-memory") is not None else None
        if self.segments is not None:  # a shutdown without close() leaves no segment either
            scheduler.on_shutdown(self.segments.drop_all)
        payload = _payload(model, loss_fn, optimizer, bucket_model)
        self._local = on_loopback(self.names)
        try:
            with self.call("set-up"):
                self._set_up(payload, gpu)
        except BaseException:
            self.close()
            raise

    def _set_up(self, payload, gpu) -> None:
        """Build a replica on every worker and form the process group over them."""
        self._client.subscribe_topic(self.topic, lambda event: self.inbox.put(("report", event[1])))
        hosts = [get_address_host(a) for a in self.names]
        # the k-th chosen worker on a host takes that host's k-th GPU
        local = [
            hosts[:r].count(h) if gpu and self.backend != "gloo" else None
            for r, h in enumerate(hosts)
        ]
        #: what device each rank really got ("cuda:0 (NVIDIA H100)", "cpu")
        self.devices = self._run(
            [
                self._submit(r, w.build, self._gid, r, self.names[r], payload, local[r])
                for r in range(len(self.names))
            ],
            "set-up",
        )
        _check_devices(self.names, hosts, self.devices)
        self._device_of = dict(zip(self.names, self.devices))
        self.form(self.names, check=True)

    # -- forming the process group ---------------------------------------------------------

    def form(self, names: list, check: bool = False) -> None:
        """(Re-)form the process group over ``names`` (rank order), a new generation each time."""
        hosts = [get_address_host(a) for a in names]
        self.names, self.generation = list(names), self.generation + 1
        if getattr(self, "_device_of", None):
            self.devices = [self._device_of[n] for n in names]
        url = self._rendezvous(hosts)
        if check:  # ranks that cannot reach each other fail here in seconds, not at the timeout
            check_reach(self, hosts, hosts[0] if url.startswith("tcp://") else None)
        #: per rank, the interface its process group uses and how it was chosen
        self.interfaces = self._run(
            [
                self._submit(
                    r,
                    w.join,
                    self._gid,
                    r,
                    len(names),
                    url,
                    self.backend,
                    self.timeout,
                    hosts[r],
                    self.generation,
                )
                for r in range(len(names))
            ],
            "set-up",
        )
        self._broken = None

    def _rendezvous(self, hosts) -> str:
        """Where the ranks meet: a file when every worker is on this machine's loopback.

        torch's TCP store listens on every interface whatever host it is given,
        so a cluster on 127.0.0.1 (the embedded one) meets through a file in a
        private temporary folder instead and opens no socket beyond loopback.
        """
        if self.rendezvous == "file" or (self.rendezvous == "auto" and self._local):
            folder = tempfile.mkdtemp(prefix="labkit-dist-")
            self._store_dirs.append(folder)
            return "file://" + os.path.join(folder, "store")
        port = self._run([self._submit(0, w.free_port, hosts[0])], "set-up")[0]
        return f"tcp://[{hosts[0]}]:{port}" if ":" in hosts[0] else f"tcp://{hosts[0]}:{port}"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- tasks ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def call(self, what: str):
        """One call of the group: what it leaves ends with it, and Dask's errors become labkit's.

        Every future the call issued in this thread (its tasks, the data it
        scattered) is released at its end, whatever happened: a failed call's
        futures live on in its traceback (a notebook keeps the last one), and
        would keep their keys on the scheduler.  An error of Dask itself (a
        future cancelled as its worker died, a closed comm) comes out as a
        :class:`~labkit.errors.WorkerLostError` naming the lost worker, or a
        :class:`~labkit.errors.SchedulerError`.
        """
        __tracebackhide__ = True
        if getattr(self._calls, "issued", None) is not None:  # within a call already
            yield
            return
        issued: list = []
        self._calls.issued = issued
        try:
            yield
        except LabkitError:
            raise
        except Exception as exc:
            err = self.labkit_error(exc, what)
            if err is None:
                raise
            raise for_caller(err) from exc
        finally:
            self._calls.issued = None
            for future in issued:
                future.release()

    def labkit_error(self, exc: BaseException, what: str) -> LabkitError | None:
        """The labkit error of Dask's ``exc`` during a ``what`` (a lost worker, if one is);
        None for an error that is not Dask's own."""
        if isinstance(exc, LabkitError) or not _from_dask(exc):
            return None
        try:
            alive = self.alive()
        except Exception:  # the scheduler is gone too
            alive = set(self.names)
        lost = [(r, n) for r, n in enumerate(self.names) if n not in alive]
        reason = f"{type(exc).__name__}: {exc}"
        if lost:
            rank, name = lost[0]
            self._broken = f"the worker of replica {rank} was lost"
            return WorkerLostError(
                f"the worker of replica {rank} was lost during a {what} ({reason}); the "
                "replica group is broken: close the trainer and start a new one",
                replica=rank,
                worker=name,
            )
        return SchedulerError(f"a {what} failed in Dask: {reason}")

    def _issued(self, future):
        """``future``, released at the end of the call that issued it (see :meth:`call`)."""
        issued = getattr(self._calls, "issued", None)
        if issued is not None:
            issued.append(future)
        return future

    def _submit(self, rank, fn, *args, **kwargs):
        # a labkit key: workers do not log these tasks' failures (see scheduling.quiet),
        # the client raises them once, located
        key = f"labkit-replica-{fn.__name__}-{self._gid[:8]}-{rank}-{uuid.uuid4().hex[:8]}"
        return self._issued(
            self._client.submit(
                fn,
                *args,
                workers=[self.names[rank]],
                key=key,
                allow_other_workers=False,
                pure=False,
                **kwargs,
            )
        )

    def ship(self, rank: int, data):
        """A future of ``data`` on rank ``rank``'s worker, released with the call."""
        # with a deadline: a scatter to a worker that is dying may otherwise never return
        shipped = self._client.scatter(
            data,
            workers=[self.names[rank]],
            hash=False,
            direct=True,
            timeout=self.timeout + _GRACE,
        )
        for future in shipped if isinstance(shipped, list) else [shipped]:
            self._issued(future)
        return shipped

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
                    raise SchedulerError(
                        f"{what} tasks were cancelled outside labkit: {type(exc).__name__}"
                    ) from exc
                alive = scheduler_identity(self._client)["workers"]
                stuck = [a for a, f in zip(names, futures) if not f.done()]
                self.check_lost(what, collective, ranks, stuck, alive)
                first_done = first_done or (len(stuck) < len(futures) and time.monotonic())
                if first_done and time.monotonic() - first_done > self.timeout + _GRACE:
                    if collective:
                        self._broken = f"a {what} did not finish"
                    raise SchedulerError(
                        f"{what} did not finish: a worker hangs", device=", ".join(stuck)
                    )
            if any(f.status in ("error", "cancelled") for f in futures):
                # a peer's death fails the others; a task of a dead worker may be cancelled
                self.check_lost(
                    what, collective, ranks, names, scheduler_identity(self._client)["workers"]
                )
            if any(f.status == "cancelled" for f in futures):
                if collective:
                    self._broken = f"a {what} was cancelled"
                raise SchedulerError(f"{what} tasks were cancelled outside labkit")
            for rank, name, f in zip(ranks, names, futures):
                if f.status == "error":
                    if collective and not isinstance(f.exception(), LabkitError):
                        # a rank's own error (located) leaves the ranks agreed; others do not
                        self._broken = f"a {what} failed"
                    raise for_caller(_client_error(f, rank, name))
            return [f.result() for f in futures]
        finally:
            self._batch.untrack(futures)
            pending = [f for f in futures if not f.done()]
            if pending:  # nobody waits for them any more
                self._client.cancel(pending)

    def check_lost(self, what, collective, ranks, candidates, alive, **where) -> None:
        """Raise a WorkerLostError naming the first rank among ``candidates`` whose worker left."""
        for rank in ranks:
            name = self.names[rank]
            if name in candidates and name not in alive:
                if collective:
                    self._broken = f"the worker of replica {rank} was lost"
                raise WorkerLostError(
                    f"the worker of replica {rank} was lost during a {what}; the replica group "
                    "is broken: close the trainer (it tears the group down) and start a new "
                    "one once the cluster has its workers back",
                    replica=rank,
                    worker=name,
                    **where,
                )

    def _check_batch(self, what, collective) -> None:
        """Raise the scheduler's cancel or shutdown here; a cut collective breaks the group."""
        try:
            self._batch.check()
        except LabkitError:
            if collective:
                self._broken = f"a {what} was cancelled"
            raise

    def alive(self) -> set:
        """Addresses of the cluster's workers now."""
        return set(scheduler_identity(self._client)["workers"])

    def stop(self, run: str) -> None:
        """Ask every rank to stop ``run`` after its current step (they stop at the same one)."""
        try:
            self._client.run(
                w.request_stop,
                self._gid,
                run,
                on_error="ignore",
                workers=[n for n in self.names if n in self.alive()],
            )
        except Exception:  # the client is closing: nothing runs any more
            pass

    # -- the contract every replica group keeps ---------------------------------------------

    @property
    def scheduler(self):
        """The scheduler whose workers hold the replicas."""
        return self._scheduler

    @property
    def client(self):
        """The Dask client of the workers that hold the replicas."""
        return self._client

    @property
    def broken(self) -> str | None:
        """Why the group is broken (a collective failed or a worker was lost), else None."""
        return self._broken

    def check_open(self):
        if self._scheduler.closed or self._client.status in ("closing", "closed"):
            raise SchedulerError(
                "the scheduler of this trainer was shut down (or its Dask "
                "client closed): the replicas are gone; open a new "
                "scheduler and a new trainer"
            )
        if self._closed:
            raise TrainingError("the replica group is closed")
        if self._broken:
            raise TrainingError(f"the replica group is broken ({self._broken}); close it")

    def steps(self, planned, done, check=None, policy: str = "raise") -> None:
        """Client-fed steps, sent ahead several to a command (see :mod:`.dask_steps`)."""
        __tracebackhide__ = True
        from ..dask_steps import CommandPipe

        self.check_open()
        with self.call("step"):
            CommandPipe(self, policy).run(planned, done, check)

    def fit_epoch(self, source, epoch: int, done, check=None, **options) -> dict:
        """One epoch over data that lives on the workers (see :mod:`.dask_epochs`)."""
        __tracebackhide__ = True
        from ..dask_epochs import epoch_runner

        self.check_open()
        with self.call("fit"):
            return epoch_runner(self, source, **options).run(epoch, done, check)

    def step(self, x, y, counts, bucket_key=None):
        """One optimizer step on ``(x, y)``; rank *i* takes the next ``counts[i]`` rows.

        Returns the batch's loss and, per rank, ``rows`` and ``seconds``.
        """
        __tracebackhide__ = True
        from ..sources import PlannedStep

        counts = self._counts(x, y, counts)
        reports = []
        self.steps([PlannedStep(x, y, counts, bucket_key)], reports.append)
        report = reports[-1]
        return report.loss, [
            {"rows": r, "seconds": s, "memory": None} for r, s in zip(report.rows, report.seconds)
        ]

    def _counts(self, x, y, counts):
        counts = [int(c) for c in counts]
        if len(counts) != len(self.names):
            raise InputError(f"{len(counts)} counts for {len(self.names)} replicas")
        if min(counts) < 0 or sum(counts) != len(x) or not len(x):
            raise InputError(f"counts {counts} do not split a batch of {len(x)} rows")
        if y is not None and len(y) != len(x):
            raise InputError(f"x has {len(x)} rows but y has {len(y)}")
        return counts

    def evaluate(self, x, y, counts, metrics=None, bucket_key=None):
        """``{"loss": ..., name: ...}`` in eval mode, weighted by rows like :meth:`step`.

        ``metrics`` maps names to ``f(output, y)``, a mean over the rows it is given.
        """
        __tracebackhide__ = True
        self.check_open()
        counts = self._counts(x, y, counts)
        ends = [sum(counts[: i + 1]) for i in range(len(counts))]
        spans = [(e - c, e) for c, e in zip(counts, ends)]
        ranks = [r for r, c in enumerate(counts) if c]
        with self.call("evaluation"):
            futures = [
                self._submit(
                    r,
                    w.evaluate,
                    self._gid,
                    r,
                    x[slice(*spans[r])].clone(),
                    None if y is None else y[slice(*spans[r])].clone(),
                    dict(metrics or {}),
                    bucket_key,
                )
                for r in ranks
            ]
            results = self._run(futures, "evaluation", ranks=ranks)
        weights = {key: row_weights(counts, key == "loss" and self.sum_loss) for key in results[0]}
        return {
            key: float(sum(weights[key][r] * res[key] for r, res in zip(ranks, results)))
            for key in results[0]
        }

    def evaluate_source(self, source, metrics=None) -> dict:
        """Mean loss and metrics over every row of data on the workers."""
        __tracebackhide__ = True
        from ..dask_epochs import EpochRunner

        self.check_open()
        # a runner of its own: a fit's validation leaves the fit's blocks placed, and
        # the blocks placed for this evaluation go as soon as it ends
        with self.call("evaluation"):
            runner = EpochRunner(self, source)
            try:
                return runner.evaluate(dict(metrics or {}))
            finally:
                runner.release()

    def set_monitors(self, monitors: list) -> None:
        """Run ``monitors`` on every rank after its backward (on the workers)."""
        self.check_open()
        blob = dumps(list(monitors), "monitor")
        self._client.run(_set_monitors, self._gid, blob, workers=list(self.names))

    def state_dict(self):
        """``{"model": ..., "optimizer": ...}`` of rank 0, as CPU tensors."""
        self.check_open()
        with self.call("state_dict"):
            return self._run([self._submit(0, w.get_state, self._gid)], "state_dict")[0]

    def load_state_dict(self, state):
        """Load a :meth:`state_dict`-shaped mapping into every rank."""
        self.check_open()
        with self.call("load_state_dict"):
            self._run(
                [self._submit(r, w.set_state, self._gid, r, state) for r in range(len(self.names))],
                "load_state_dict",
            )

    def last_state(self):
        """Like :meth:`state_dict`, from the first rank whose worker is alive, even when broken.

        Read beside the task threads (``client.run``), so it never waits behind a
        stuck task.  None when no rank survived.
        """
        if self._closed:
            raise TrainingError("the replica group is closed")
        if not self._broken:
            return self.state_dict()
        alive = self.alive()
        for name in [a for a in self.names if a in alive]:
            try:
                return self._client.run(w.get_state, self._gid, workers=[name])[name]
            except Exception:  # that worker left too, or lost the replica: try the next
                continue
        return None

    def close(self):
        """Drop the replicas and their process group on every surviving worker; idempotent.

        Never raises: a lost worker took its rank with it, and the others are
        torn down (their process group closed) whatever happened.
        """
        if self._closed:
            return
        self._closed = True
        try:
            self._client.unsubscribe_topic(self.topic)
        except Exception:
            pass
        try:
            self._client.run(
                w.teardown,
                self._gid,
                on_error="ignore",
                workers=[a for a in self.names if a in self.alive()],
            )
        except Exception:  # a closed client leaves nothing to tear down
            pass
        finally:
            for folder in self._store_dirs:
                shutil.rmtree(folder, ignore_errors=True)
            if self.segments is not None:
                self.segments.drop_all()
            try:
                self._batch.close()
            except Exception:  # the scheduler was shut down first: nothing left to release
                pass


def _from_dask(exc: BaseException) -> bool:
    """Whether ``exc`` is Dask's (or its comms') own, not the user's code's."""
    import concurrent.futures

    module = type(exc).__module__ or ""
    return module.split(".")[0] in ("distributed", "tornado", "asyncio") or isinstance(
        exc, (concurrent.futures.CancelledError, asyncio.CancelledError, OSError)
    )


def _set_monitors(gid, blob):
    """On a worker: the monitors its rank of ``gid`` calls after backward."""
    rank = w.RANKS.get(gid)
    if rank is not None:
        rank.monitors = cloudpickle.loads(blob)


def _check_devices(names, hosts, devices) -> None:
    """Two ranks on one host must not share a GPU (each rank its own device)."""
    seen = {}
    for name, host, device in zip(names, hosts, devices):
        if device.startswith("cuda"):
            where = (host, device.split(" ")[0])
            if where in seen:
                raise SchedulerError(
                    f"the workers {seen[where]} and {name} got the same GPU "
                    f"({device}) on {host}: give each worker its own GPU "
                    "(CUDA_VISIBLE_DEVICES per worker, or dask-cuda)",
                    device=name,
                )
            seen[where] = name
