"""Replicas on Dask workers that reduce gradients with ``torch.distributed``.

:class:`DaskReplicaGroup` keeps one persistent replica (model, optimizer, loss)
per Dask worker; rank *i* lives on ``names[i]``.  Dask places, pins and watches
the tasks (:mod:`.tasks`); each group has a process group of its own (gloo on
CPU, NCCL on GPUs, see :mod:`..worker.process_group`), so several trainers
share a cluster.

* Set-up: replicas built from one pickled payload, each GPU worker on its own
  GPU (:mod:`.setup`); ranks that cannot reach each other are found in
  seconds, then every rank joins the process group (:mod:`.forming`).
* Training runs in loops on the workers (:mod:`..worker.training`): whole
  epochs over the rows each rank holds (:mod:`.epochs`), or commands of
  client-fed steps sent ahead (:mod:`.steps`); rank 0 streams the reports.
* After each call rank 0's state is copied into the client's model and
  optimizer (:mod:`.copy_back`); a checkpoint is written by rank 0 and read by
  every rank (:mod:`.saving`).
* A lost worker: an epoch loop re-forms the group on the workers left and
  goes on from the last commit (:mod:`.epochs`); elsewhere a
  :class:`~labkit.errors.WorkerLostError` names the worker.  A worker that
  joined the cluster is taken in at an epoch's start (:mod:`.growing`).  A
  group that lost a collective is broken: close it.
"""

from __future__ import annotations

import contextlib
import queue
import shutil
import uuid
from collections.abc import Callable, Iterable

from distributed.comm import get_address_host

from ...errors import InputError, LabkitError, SchedulerError, TrainingError
from ...events import TaskInfo
from ...scheduling.dask.connect import on_loopback
from ...scheduling.tasks.pickling import dumps
from ...scheduling.workers.shared import SharedChunks
from ..fit_data import PlannedStep, Source
from ..replica_group import EpochOptions
from ..reports import StepReport
from ..split import row_weights
from ..worker import lifecycle as life
from ..worker.training import evaluate as evaluate_on_rank
from .copy_back import fetch_state
from .epochs import EpochRunner
from .forming import join_ranks, meeting_point
from .saving import read_state, write_state
from .setup import build_replicas, check_scheduler, choose_workers, closed_with, payload
from .steps import CommandPipe
from .stops import RememberingBatch
from .tasks import RankTasks

__all__ = ["DaskReplicaGroup"]


class DaskReplicaGroup:
    """One persistent torch replica per Dask worker, reducing gradients with torch.distributed.

    Parameters
    ----------
    model : torch.nn.Module
        Copied to every worker; the trainer loads the ranks' state back into it
        after each call (see :meth:`fetch_state`).
    loss_fn : callable
        ``loss_fn(output, y)``: a mean over rows unless its ``reduction`` is ``"sum"``.
    optimizer : torch.optim.Optimizer
        Over ``model``'s parameters; rebuilt on each worker from its type,
        defaults, parameter groups and state.
    scheduler : labkit.DaskScheduler
        Its ``client`` runs the tasks.
    workers : list of str, optional
        Worker addresses in rank order; by default the scheduler's ``workers``
        (``trial.scheduler``), else all (those with a ``GPU``, if any), sorted,
        and those that join the cluster later too, at a fit's next epoch.
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

    #: The replicas are copies on the workers: the trainer copies their state back.
    holds_model = False

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
        check_scheduler(scheduler, rendezvous)
        self.rendezvous = rendezvous
        self.gid, self._scheduler = uuid.uuid4().hex, scheduler
        # The replicas' tasks go through a batch of the scheduler, so that cancelling
        # or shutting down the scheduler reaches them as it reaches every other task.
        batch = scheduler.batch(info=TaskInfo(f"replicas-{self.gid[:8]}", -1, -1))
        self._batch = RememberingBatch(batch)  # a stopped trial's reason, kept (see .stops)
        self._closed, self.generation = False, 0
        self.timeout = float(timeout)
        names, slots = choose_workers(scheduler, workers)
        #: the group's tasks on its workers: submitted, awaited, released
        self.tasks = RankTasks(scheduler.client, self.gid, self._batch, names, self.timeout)
        self.backend = backend or ("nccl" if slots is not None else "gloo")
        self.sum_loss = getattr(loss_fn, "reduction", "mean") == "sum"
        self._store_dirs: list[str] = []
        self.replicas: list = []  # they live on the workers
        self.interfaces, self.devices = [], []
        self.device_of: dict[str, str] = {}  # each worker's device, described
        #: whether it keeps its workers (``workers=``, a scheduler over some), and when it
        #: last looked for workers to take in (see .growing)
        self.pinned, self.looked_at = bool(workers or getattr(scheduler, "workers", None)), 0.0
        self.monitors: bytes | None = None  # the pickled monitors, for ranks that join
        self._epochs: EpochRunner | None = None  # the runner of the fit now, between its epochs
        self.step_seconds: float | None = None  # of the last client-fed command (see .steps)
        #: reports streamed by rank 0 (see ..reports), and completions of long tasks
        self.topic = f"labkit-fit-{self.gid[:12]}"
        self.inbox: queue.SimpleQueue[tuple] = queue.SimpleQueue()
        #: client-fed steps' shares in shared memory, where the scheduler sends chunks so
        #: (worker processes of this machine); None: they travel through sockets
        self.segments = SharedChunks() if scheduler.route("shared-memory") is not None else None
        if self.segments is not None:  # a shutdown without close() leaves no segment either
            scheduler.on_shutdown(self.segments.drop_all)
        closed_with(scheduler, self)
        self.shipped = shipped = payload(model, loss_fn, optimizer, bucket_model)
        self._local = on_loopback(names)
        try:
            with self.tasks.call("set-up"):
                self._set_up(shipped, slots)
        except BaseException:
            self.close()
            raise

    def _set_up(self, shipped: bytes, slots: list[int] | None) -> None:
        """Build a replica on every worker and form the process group over them."""
        self.client.subscribe_topic(self.topic, lambda event: self.inbox.put(("report", event[1])))
        #: what device each rank really got ("cuda:0 (NVIDIA H100)", "cpu")
        self.devices = build_replicas(
            self.tasks, shipped, None if self.backend == "gloo" else slots
        )
        self.device_of = dict(zip(self.names, self.devices, strict=True))
        self.form(self.names, check=True)

    def form(self, names: list, check: bool = False) -> None:
        """(Re-)form the process group over ``names`` (rank order), a new generation each time."""
        hosts = [get_address_host(a) for a in names]
        self.tasks.names, self.generation = list(names), self.generation + 1
        if self.device_of:
            self.devices = [self.device_of[n] for n in names]
        url, folder = meeting_point(self.rendezvous, on_loopback(names), self.tasks, hosts)
        self._store_dirs += [folder] if folder else []
        #: per rank, the interface its process group uses and how it was chosen
        self.interfaces = join_ranks(
            self.tasks, url, self.backend, self.timeout, hosts, self.generation, check
        )
        self.tasks.broken = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- what the group's parts share ------------------------------------------------------

    @property
    def names(self) -> list[str]:
        """The workers of the ranks, in rank order (fewer after a lost worker)."""
        return self.tasks.names

    @property
    def scheduler(self):
        """The scheduler whose workers hold the replicas."""
        return self._scheduler

    @property
    def client(self):
        """The Dask client of the workers that hold the replicas."""
        return self.tasks.client

    @property
    def broken(self) -> str | None:
        """Why the group is broken (a collective failed or a worker was lost), else None."""
        return self.tasks.broken

    def alive(self) -> set:
        """Addresses of the cluster's workers now."""
        return self.tasks.alive()

    def stop(self, run: str) -> None:
        """Ask every rank to stop ``run`` after its current step (they stop at the same one)."""
        with contextlib.suppress(Exception):  # the client is closing: nothing runs any more
            self.tasks.beside(life.request_stop, self.gid, run)

    def memory(self, index: int) -> tuple[int | None, int | None]:
        """``(bytes in use, limit)`` of rank ``index``'s device: not read on workers."""
        return None, None

    # -- the contract every replica group keeps ---------------------------------------------

    def check_open(self) -> None:
        """Raise when the group cannot take a call: closed, broken, or its scheduler gone."""
        if self._scheduler.closed or self.client.status in ("closing", "closed"):
            reason = self.stop_reason()
            if reason is not None:  # whoever shut it down said why: a stopped trial
                raise reason
            raise SchedulerError(
                "the scheduler of this trainer was shut down (or its Dask "
                "client closed): the replicas are gone; open a new "
                "scheduler and a new trainer"
            )
        if self._closed:
            raise TrainingError("the replica group is closed")
        if self.broken:
            raise TrainingError(f"the replica group is broken ({self.broken}); close it")

    def stop_reason(self) -> LabkitError | None:
        """The reason the group's scheduler was cancelled with, where one was given.

        A sweep that stops a group trial cancels the trial's scheduler with
        ``TrialStopped`` before shutting it down: the trial's fit raises that,
        as it would on any other placement, not the shutdown's ``SchedulerError``.
        """
        return self._batch.stop_reason()

    def steps(
        self,
        planned: Iterable[PlannedStep],
        done: Callable[[StepReport], None],
        check: Callable[[], None] | None = None,
        policy: str = "raise",
    ) -> None:
        """Client-fed steps, sent ahead several to a command (see :mod:`.steps`)."""
        __tracebackhide__ = True
        self.check_open()
        with self.tasks.call("step"):
            CommandPipe(self, policy).run(planned, done, check)

    def step(self, x, y, counts, bucket_key=None):
        """One optimizer step on ``(x, y)``; rank *i* takes the next ``counts[i]`` rows.

        Returns the batch's loss and, per rank, ``rows`` and ``seconds``.
        """
        __tracebackhide__ = True
        counts = self._counts(x, y, counts)
        reports: list[StepReport] = []
        self.steps([PlannedStep(x, y, counts, bucket_key)], reports.append)
        report = reports[-1]
        return report.loss, [
            {"rows": r, "seconds": s, "memory": None}
            for r, s in zip(report.rows, report.seconds, strict=True)
        ]

    def _counts(self, x, y, counts) -> list[int]:
        """``counts`` checked: one a rank, splitting the batch ``(x, y)``."""
        counts = [int(c) for c in counts]
        if len(counts) != len(self.names):
            raise InputError(f"{len(counts)} counts for {len(self.names)} replicas")
        if min(counts) < 0 or sum(counts) != len(x) or not len(x):
            raise InputError(f"counts {counts} do not split a batch of {len(x)} rows")
        if y is not None and len(y) != len(x):
            raise InputError(f"x has {len(x)} rows but y has {len(y)}")
        return counts

    def evaluate(self, x, y, counts, metrics=None, bucket_key=None) -> dict[str, float]:
        """``{"loss": ..., name: ...}`` in eval mode, weighted by rows like :meth:`step`.

        ``metrics`` maps names to ``f(output, y)``, a mean over the rows it is given.
        """
        __tracebackhide__ = True
        self.check_open()
        counts = self._counts(x, y, counts)
        ends = [sum(counts[: i + 1]) for i in range(len(counts))]
        spans = [(e - c, e) for c, e in zip(counts, ends, strict=True)]
        ranks = [r for r, c in enumerate(counts) if c]
        with self.tasks.call("evaluation"):
            futures = [
                self.tasks.submit(
                    r,
                    evaluate_on_rank,
                    self.gid,
                    r,
                    x[slice(*spans[r])].clone(),
                    None if y is None else y[slice(*spans[r])].clone(),
                    dict(metrics or {}),
                    bucket_key,
                )
                for r in ranks
            ]
            results = self.tasks.run(futures, "evaluation", ranks=ranks)
        weights = {key: row_weights(counts, key == "loss" and self.sum_loss) for key in results[0]}
        return {
            key: float(
                sum(weights[key][r] * res[key] for r, res in zip(ranks, results, strict=True))
            )
            for key in results[0]
        }

    # -- capabilities: data on the workers (FitsEpochs, EvaluatesSources; Recovers: form) ---

    def fit_epoch(
        self,
        source: Source,
        epoch: int,
        done: Callable[[StepReport], None],
        check: Callable[[], None] | None,
        *,
        run: str,
        shares: Callable[[], list],
        policy: str,
        options: EpochOptions,
    ) -> dict:
        """One epoch over data that lives on the workers (see :mod:`.epochs`).

        The fit's runner (its blocks placed on the workers) is kept between its
        epochs until :meth:`end_fit`.
        """
        __tracebackhide__ = True
        self.check_open()
        with self.tasks.call("fit"):
            runner = self._epochs
            if runner is None or runner.source is not source:
                self.end_fit(None)
                runner = self._epochs = EpochRunner(self, source)
            runner.configure(run=run, shares=shares, policy=policy, options=options)
            return runner.run(epoch, done, check)

    def end_fit(self, source: Source | None) -> None:
        """Let go of what the fit over ``source`` placed on the workers (any fit's: None)."""
        runner = self._epochs
        if runner is not None and (source is None or runner.source is source):
            runner.release()
            self._epochs = None

    def evaluate_source(self, source: Source, metrics: dict | None = None) -> dict[str, float]:
        """Mean loss and metrics over every row of data on the workers."""
        __tracebackhide__ = True
        self.check_open()
        # a runner of its own: a fit's validation leaves the fit's blocks placed, and
        # the blocks placed for this evaluation go as soon as it ends
        with self.tasks.call("evaluation"):
            runner = EpochRunner(self, source)
            try:
                return runner.evaluate(dict(metrics or {}))
            finally:
                runner.release()

    # -- the contract again: monitors, state, close ---------------------------------------

    def set_monitors(self, monitors) -> None:
        """Run ``monitors`` on every rank after its backward (on the workers)."""
        self.check_open()
        self.monitors = blob = dumps(list(monitors), "monitor")
        self.client.run(life.set_monitors, self.gid, blob, workers=list(self.names))

    def state_dict(self) -> dict:
        """``{"model": ..., "optimizer": ...}`` of rank 0, as CPU tensors, read as the copy
        after a call is (:func:`.copy_back.fetch_state`): one gather, bounded, never
        restarted (a gather re-asked every second never finished for a big model, loaded)."""
        self.check_open()
        return self.fetch_state() or {}

    def load_state_dict(self, state: dict) -> None:
        """Load a :meth:`state_dict`-shaped mapping into every rank."""
        self.check_open()
        with self.tasks.call("load_state_dict"):
            self.tasks.run(
                [
                    self.tasks.submit(r, life.set_state, self.gid, r, state)
                    for r in range(len(self.names))
                ],
                "load_state_dict",
            )

    def write_state(self, location, key: str, step, extra: dict):
        """Rank 0 writes the state (and ``extra``) to ``location`` itself (see .saving)."""
        return write_state(self, location, key, step, extra)

    def read_state(self, location, ref) -> dict:
        """Every rank loads ``ref`` from ``location`` itself (see .saving); the extras."""
        return read_state(self, location, ref)

    def fetch_state(self) -> dict | None:
        """What the ranks hold now, for the client's model: from one rank, as CPU tensors.

        Rank 0's, sent straight from its worker (:mod:`.copy_back`); after a
        lost worker, a surviving rank's (:meth:`last_state`).  None when no
        rank survived.
        """
        __tracebackhide__ = True
        if self.broken:
            return self.last_state()
        self.check_open()
        # straight from the worker where the client surely reaches it (Dask's own
        # default gathers through the scheduler: a client may not reach workers elsewhere)
        return fetch_state(self, direct=self._local or bool(self.client.direct_to_workers))

    def last_state(self) -> dict | None:
        """Like :meth:`state_dict`, from the first rank whose worker is alive, even when broken.

        Read beside the task threads (``client.run``), so it never waits behind a
        stuck task.  None when no rank survived.
        """
        if self._closed:
            raise TrainingError("the replica group is closed")
        if not self.broken:
            return self.state_dict()
        alive = self.alive()
        for name in [a for a in self.names if a in alive]:
            with contextlib.suppress(Exception):  # that worker left too: try the next
                if state := self.client.run(life.held_state, self.gid, workers=[name])[name]:
                    return state  # (None: its replica was torn down, a group taken back)
        return None

    def close(self) -> None:
        """Drop the replicas and their process group on every surviving worker; idempotent.

        Never raises: a lost worker took its rank with it, and the others are
        torn down (their process group closed) whatever happened.
        """
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            self.client.unsubscribe_topic(self.topic)
        try:
            self.tasks.beside(life.teardown, self.gid)
        except Exception:  # a closed client leaves nothing to tear down
            pass
        finally:
            for folder in self._store_dirs:
                shutil.rmtree(folder, ignore_errors=True)
            if self.segments is not None:
                self.segments.drop_all()
            # the scheduler may have shut down first: nothing left to release then
            with contextlib.suppress(Exception):
                self.tasks.batch.close()
