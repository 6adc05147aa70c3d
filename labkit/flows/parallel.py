"""``ParallelFlow``: train and execute a flow with a scheduler.

For each phase of each trainable node the node forks; the fork travels to
the workers once inside a :class:`FlowTrainCallable`; chunks are pulled from
the user's source lazily and submitted with a bound on tasks in flight; forks
come back and are joined into the node as they complete; then
``stop_training`` runs locally.  A node that cannot fork trains locally and
sends no tasks.

Examples
--------
>>> import numpy as np, labkit as lk
>>> x = np.random.default_rng(0).normal(size=(300, 5))
>>> flow = lk.ParallelFlow([lk.nodes.PCA(output_dim=3)])
>>> flow.train([np.array_split(x, 3)], scheduler=lk.LocalScheduler())
>>> flow.execute(np.array_split(x, 3)).shape
(300, 3)
"""

from __future__ import annotations

import copy
import time
import uuid

import numpy as np

from ..errors import InputError, LabkitError, NotForkableError, SchedulerError
from ..events import NodeJoined, PhaseFinished, PhaseStarted, TaskInfo
from ..runs import start
from ..scheduling.tasks.base import Scheduler
from ..scheduling.tasks.local import LocalScheduler
from ..scheduling.tasks.results import OrderedResultContainer, ResultContainer
from ..scheduling.tasks.starting import chunk_nbytes
from .callables import FlowExecuteCallable, FlowTrainCallable, join_execute_forks
from .chunks import as_chunks, known_length, pulled
from .flow import Flow, restore_node
from .manual import ManualTasksMixin
from .worker_join import JOIN_MODES, WorkerJoin, WorkerJoinCallable

__all__ = ["ParallelFlow", "JoinResultContainer"]


def _view_state(node, plots: bool = True) -> dict:
    """``node.state()`` for subscribers, its linear algebra on one BLAS thread.

    OpenBLAS's extra threads spin after each call; in the client process they
    would take CPU from the workers on the same cores.
    """
    if not plots:
        return node.state(plots=False)
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        return node.state()


class JoinResultContainer(ResultContainer):
    """Joins each forked node into ``node`` as it arrives; reports each join."""

    def __init__(self, node, on_join=None):
        self.node = node
        self.on_join = on_join
        self.joined = 0

    def add_result(self, result, task_index):
        self.node.join(result)
        self.joined += 1
        if self.on_join is not None:
            self.on_join()

    def get_results(self):
        joined, self.joined = self.joined, 0
        return joined

    def discard(self):
        self.joined = 0  # the flow restores the node itself


#: Most of one core that computing node state for subscribers may take while training.
STATE_CPU_SHARE = 0.005


class _JoinReporter:
    """Emits ``NodeJoined`` after each join; plot arrays only as often as a subscriber asks.

    And no more often than keeps their cost within :data:`STATE_CPU_SHARE` of a
    core: an eigendecomposition for a PCA plot competes with the tasks for the
    same cores.
    """

    def __init__(self, scheduler, run, index, node, phase):
        self.scheduler, self.run, self.index, self.node, self.phase = (
            scheduler,
            run,
            index,
            node,
            phase,
        )
        self.next: float | None = None  # when plot arrays may next be computed

    def __call__(self) -> None:
        s = self.scheduler
        if not s.has_subscribers:
            return
        every, now = s.state_every, time.monotonic()
        plots = every is not None and (self.next is None or now >= self.next)
        start = time.thread_time()
        state = _view_state(self.node, plots)
        if plots:
            cost = time.thread_time() - start
            self.next = now + max(every, cost / STATE_CPU_SHARE)
        s.emit(NodeJoined(self.run, self.index, self.node.name, self.phase, self.node.joins, state))


class ParallelFlow(ManualTasksMixin, Flow):
    """A flow whose nodes train and execute in parallel on a scheduler."""

    # -- training ----------------------------------------------------------------

    def train(  # type: ignore[override]  # public since the seed: the scheduler before resume
        self,
        data_iterables,
        scheduler=None,
        wait: bool = True,
        train_callable_class=None,
        resume: bool = False,
        join: str = "auto",
    ):
        """Train the flow with a scheduler.

        Parameters
        ----------
        data_iterables : list
            One chunk source per node (``None`` for untrainable nodes).
        scheduler : Scheduler, list of Scheduler, or None
            One scheduler for all nodes (left running), or one per node (``None``
            entries train that node on the client), each shut down once its
            last node is trained.  ``None`` trains in-process, serially.
        wait : bool
            ``False`` returns a :class:`~labkit.Run` at once and trains in the background.
        train_callable_class : type, optional
            A :class:`FlowTrainCallable` subclass, e.g. with a ``transform``.
        resume : bool
            Skip nodes that are already trained.
        join : {"auto", "client", "workers"}
            Where forks are joined.  ``"client"``: one fork a chunk comes back
            and is joined here (live node state after every chunk).
            ``"workers"``: each worker thread trains its chunks into one fork of
            its own, and the client joins one fork per worker thread (see
            :mod:`labkit.flows.worker_join`).  ``"auto"`` joins on the workers
            when they are other processes (forks would be pickled), else here.
        """
        if join not in JOIN_MODES:
            raise InputError(f"join must be one of {', '.join(JOIN_MODES)}, got {join!r}")
        sources = self._check_training(data_iterables, resume)
        schedulers, owned = self._schedulers_for(scheduler)
        callable_class = train_callable_class or FlowTrainCallable

        def job(scope):
            return self._train_all(sources, schedulers, owned, callable_class, scope, join)

        return start(
            "train",
            schedulers,
            job,
            wait=wait,
            n_nodes=len(self.nodes),
            detail={"nodes": len(self.nodes)},
        )

    def _schedulers_for(self, scheduler) -> tuple[list, list]:
        """One scheduler (or None) per node, and those that train must shut down."""
        n = len(self.nodes)
        if scheduler is None:
            local = LocalScheduler()
            return [local] * n, [local]
        if isinstance(scheduler, Scheduler):
            return [scheduler] * n, []
        if isinstance(scheduler, (str, bytes)):
            raise InputError(
                f"scheduler must be a Scheduler, a list of them or None, got the "
                f"string {scheduler!r}; for a Dask cluster at an address pass "
                f"lk.DaskScheduler({scheduler!r})"
            )
        try:
            schedulers = list(scheduler)
        except TypeError:
            raise InputError(
                f"scheduler must be a Scheduler, a list of them or None, got "
                f"{type(scheduler).__name__}"
            ) from None
        if len(schedulers) != n:
            raise InputError(f"got {len(schedulers)} schedulers for {n} nodes")
        for i, s in enumerate(schedulers):
            if s is not None and not isinstance(s, Scheduler):
                raise InputError(f"scheduler entry {i} is a {type(s).__name__}", node=i)
        owned = [s for i, s in enumerate(schedulers) if s is not None and s not in schedulers[:i]]
        return schedulers, owned

    def _train_all(self, sources, schedulers, owned, callable_class, scope, join):
        try:
            for i, chunks in enumerate(sources):
                if chunks is not None:
                    self._train_node(i, chunks, schedulers[i], callable_class, scope, join)
                    self._after_node(i)
                self._shut_down_finished(i, schedulers, owned)
        finally:
            for s in owned:
                s.shutdown()

    @staticmethod
    def _shut_down_finished(i, schedulers, owned) -> None:
        """Shut down owned schedulers that no later node uses."""
        for s in list(owned):
            if s not in schedulers[i + 1 :]:
                s.shutdown()
                owned.remove(s)

    def _train_node(self, i, chunks, scheduler, callable_class, scope, join) -> None:
        node = self.nodes[i]
        snapshot = copy.deepcopy(node)
        emit = scheduler.emit if scheduler is not None else (lambda event: None)
        try:
            while node.is_training():
                scope.check()
                phase = node.phase
                fork = self._try_fork(node) if scheduler is not None else None
                emit(
                    PhaseStarted(
                        scope.id,
                        i,
                        node.name,
                        phase,
                        local=fork is None,
                        n_tasks=None if fork is None else known_length(chunks),
                    )
                )
                if fork is None:
                    self._train_phase_serial(i, chunks)
                    n_tasks = 0
                else:
                    n_tasks = self._train_phase_tasks(
                        i, chunks, scheduler, fork, callable_class, scope, join
                    )
                listening = scheduler is not None and scheduler.has_subscribers
                plots = listening and scheduler.state_every is not None
                emit(
                    PhaseFinished(
                        scope.id,
                        i,
                        node.name,
                        phase,
                        n_tasks,
                        state=_view_state(node, plots) if listening else None,
                    )
                )
        except BaseException as exc:
            emit(PhaseFinished(scope.id, i, node.name, node.phase, 0, ok=False))
            restore_node(node, snapshot)
            if isinstance(exc, LabkitError):  # e.g. the node's own fork() failed
                exc.locate(node=i, node_name=node.name)
            raise

    @staticmethod
    def _try_fork(node):
        try:
            return node.fork()
        except NotForkableError:
            return None

    def _train_phase_tasks(
        self, i, chunks, scheduler, fork, callable_class, scope, join="auto"
    ) -> int:
        """Run one phase as tasks; forks are joined into node ``i`` as they complete."""
        node, phase = self.nodes[i], self.nodes[i].phase
        task_callable = callable_class(self.nodes[:i], fork)
        info = TaskInfo(scope.id, -1, -1, "train", i, node.name, phase)
        reporter = _JoinReporter(scheduler, scope.id, i, node, phase)
        if self._joins_on_workers(scheduler, task_callable, join):
            n_tasks = self._train_on_workers(
                scheduler, chunks, task_callable, info, reporter, scope
            )
        else:
            n_tasks = self._run_tasks(
                scheduler, chunks, task_callable, info, JoinResultContainer(node, reporter), scope
            )
        try:
            node.stop_training()
        except LabkitError as err:
            err.locate(node=i, node_name=node.name, phase=phase)
            raise  # the same error, located
        return n_tasks

    @staticmethod
    def _joins_on_workers(scheduler, task_callable, mode: str) -> bool:
        """Whether this phase's forks are joined on the workers (see ``train``'s ``join``)."""
        if mode == "client":
            return False
        offloaded = (
            getattr(scheduler, "offload_pool", None) is not None and task_callable.holds_gil
        )  # runs in a pool process that take_forks cannot reach
        if offloaded:
            return False
        return mode == "workers" or not scheduler.in_process

    #: Seconds between taking forks back while views watch a phase joined on the workers.
    LIVE_COLLECT_EVERY = 1.0

    def _train_on_workers(self, scheduler, chunks, task_callable, info, reporter, scope) -> int:
        """One phase joined on the workers; chunks no joined fork covers are trained again."""
        node = self.nodes[info.node]
        where = dict(node=info.node, node_name=info.node_name, phase=info.phase)
        joiner = WorkerJoin(
            scheduler,
            node,
            f"{scope.id}-{info.node}-{info.phase}-{uuid.uuid4().hex[:8]}",
            keep=not scheduler.in_process,
            on_join=reporter,
        )
        callable_ = WorkerJoinCallable(task_callable, joiner.key)
        try:
            with scheduler.batch(None, info, scope.control) as batch:
                with joiner.collecting():  # a worker that leaves takes little work with it
                    count = self._submit_for_workers(
                        scheduler, batch, chunks, callable_, joiner, scope, where
                    )
                    if count == 0:
                        raise InputError(f"{info.node_name} got an empty data iterable", **where)
                    batch.get_results()
                # before the batch ends: its end drops the shipped callable, and the forks
                # on the workers with it
                joiner.collect(final=True)
            missing = joiner.missing(count)
            if missing:
                self._run_tasks(
                    scheduler,
                    joiner.data_for(missing),
                    task_callable,
                    info,
                    JoinResultContainer(node, reporter),
                    scope,
                )
        except LabkitError as err:
            joiner.abandon()
            err.locate(**where)
            raise  # the same error, located
        except BaseException:
            joiner.abandon()
            raise
        return count + len(missing)

    def _submit_for_workers(self, scheduler, batch, chunks, callable_, joiner, scope, where) -> int:
        """Submit every chunk; take forks back on the way when the client keeps too much
        or views watch."""
        count, last = 0, time.monotonic()
        for chunk in pulled(chunks, **where):
            scope.check()
            batch.add_task(chunk, callable_)
            joiner.added(count, chunk, chunk_nbytes(chunk))
            count += 1
            now = time.monotonic()
            live = scheduler.has_subscribers and now - last >= self.LIVE_COLLECT_EVERY
            if live or joiner.kept_bytes > scheduler.max_bytes_in_flight:
                joiner.collect()
                last = now
        return count

    @staticmethod
    def _run_tasks(scheduler, chunks, task_callable, info, container, scope):
        """Submit every chunk lazily as one batch; wait for all; ``container.get_results()``.

        For a join container that is the number of joins: one per task, checked.
        """
        where = dict(node=info.node, node_name=info.node_name, phase=info.phase)
        try:
            with scheduler.batch(container, info, scope.control) as batch:
                # chunks at hand (a list, a Dask array's blocks) start together
                count = batch.add_tasks(
                    pulled(chunks, **where),
                    task_callable,
                    ready=known_length(chunks) is not None,
                    check=scope.check,
                )
                if count == 0:
                    raise InputError(
                        f"{info.node_name or 'execute'} got an empty data iterable", **where
                    )
                results = batch.get_results()
        except LabkitError as err:
            err.locate(**where)
            raise  # the same error, located
        if isinstance(container, JoinResultContainer) and results != count:
            raise SchedulerError(f"joined {results} of {count} chunks", **where)
        return results

    # -- execution ---------------------------------------------------------------

    def execute(  # type: ignore[override]  # public since the seed: chunks and a scheduler
        self,
        iterable,
        scheduler=None,
        nodenr: int | None = None,
        execute_callable_class=None,
        wait: bool = True,
    ):
        """Execute chunks in parallel; the output keeps chunk order.

        Parameters
        ----------
        iterable : array, iterable of chunks, Dask array, or list of futures
        scheduler : Scheduler, optional
            In-process and serial when ``None``.
        nodenr : int, optional
            Execute nodes ``0..nodenr`` only.
        wait : bool
            ``False`` returns a :class:`~labkit.Run` whose ``result()`` is the output.
        """
        nodes = self._executing_nodes(nodenr)
        chunks = as_chunks(iterable)
        owned = scheduler is None
        scheduler = scheduler if scheduler is not None else LocalScheduler()
        task_callable = (execute_callable_class or FlowExecuteCallable)(nodes)

        def job(scope):
            try:
                return self._execute_all(nodes, chunks, scheduler, task_callable, scope)
            finally:
                if owned:
                    scheduler.shutdown()

        return start(
            "execute", [scheduler], job, wait=wait, n_nodes=len(nodes), detail={"nodes": len(nodes)}
        )

    def _execute_all(self, nodes, chunks, scheduler, task_callable, scope):
        info = TaskInfo(scope.id, -1, -1, "execute")
        results = self._run_tasks(
            scheduler, chunks, task_callable, info, OrderedResultContainer(), scope
        )
        if task_callable.forking:
            results = [join_execute_forks(nodes, r) for r in results]
        return np.concatenate(results)
