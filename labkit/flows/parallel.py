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
import dataclasses
import time
import uuid

import numpy as np

from ..errors import InputError, LabkitError, NotForkableError
from ..events import NodeJoined, PhaseFinished, PhaseStarted, RunFinished, RunStarted, TaskInfo
from ..scheduling.base import Scheduler
from ..scheduling.local import LocalScheduler
from ..scheduling.results import OrderedResultContainer, ResultContainer
from .callables import FlowExecuteCallable, FlowTrainCallable
from .flow import Flow, restore_node
from .manual import ManualTasksMixin
from .run import Run, RunControl
from .sources import as_chunks, known_length

__all__ = ["ParallelFlow", "JoinResultContainer", "PLOT_INTERVAL"]

#: Seconds between computations of a node's plot arrays while forks are joined.
PLOT_INTERVAL = 0.5


def _view_state(node, plots: bool = True) -> dict:
    """``node.state()`` for views, its linear algebra on one BLAS thread.

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


def _new_run_id(kind: str) -> str:
    return f"{kind}-{uuid.uuid4().hex[:8]}"


class ParallelFlow(ManualTasksMixin, Flow):
    """A flow whose nodes train and execute in parallel on a scheduler."""

    # -- training ----------------------------------------------------------------

    def train(self, data_iterables, scheduler=None, wait: bool = True,
              train_callable_class=None, resume: bool = False):
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
            ``False`` returns a :class:`Run` at once and trains in the background.
        train_callable_class : type, optional
            A :class:`FlowTrainCallable` subclass, e.g. with a ``transform``.
        resume : bool
            Skip nodes that are already trained.
        """
        sources = self._check_training(data_iterables, resume)
        schedulers, owned = self._schedulers_for(scheduler)
        callable_class = train_callable_class or FlowTrainCallable
        run_id = _new_run_id("train")

        def job(control):
            return self._train_all(sources, schedulers, owned, callable_class, run_id, control)

        if wait:
            return job(RunControl())
        return Run("train", run_id, schedulers, job)

    def _schedulers_for(self, scheduler) -> tuple[list, list]:
        """One scheduler (or None) per node, and those that train must shut down."""
        n = len(self.nodes)
        if scheduler is None:
            local = LocalScheduler()
            return [local] * n, [local]
        if isinstance(scheduler, Scheduler):
            return [scheduler] * n, []
        try:
            schedulers = list(scheduler)
        except TypeError:
            raise InputError(f"scheduler must be a Scheduler, a list of them or None, got "
                             f"{type(scheduler).__name__}") from None
        if len(schedulers) != n:
            raise InputError(f"got {len(schedulers)} schedulers for {n} nodes")
        for i, s in enumerate(schedulers):
            if s is not None and not isinstance(s, Scheduler):
                raise InputError(f"scheduler entry {i} is a {type(s).__name__}", node=i)
        owned = [s for i, s in enumerate(schedulers) if s is not None and s not in schedulers[:i]]
        return schedulers, owned

    def _train_all(self, sources, schedulers, owned, callable_class, run_id, control):
        distinct = [s for i, s in enumerate(schedulers) if s is not None and s not in schedulers[:i]]
        for s in distinct:
            s.emit(RunStarted(run_id, "train", len(self.nodes)))
        try:
            for i, chunks in enumerate(sources):
                if chunks is not None:
                    self._train_node(i, chunks, schedulers[i], callable_class, run_id, control)
                    self._after_node(i)
                self._shut_down_finished(i, schedulers, owned)
        except BaseException as err:
            for s in distinct:
                s.emit(RunFinished(run_id, ok=False, error=str(err),
                                   cancelled=control.cancelled))
            raise
        else:
            for s in distinct:
                s.emit(RunFinished(run_id, ok=True))
        finally:
            for s in owned:
                s.shutdown()

    @staticmethod
    def _shut_down_finished(i, schedulers, owned) -> None:
        """Shut down owned schedulers that no later node uses."""
        for s in list(owned):
            if s not in schedulers[i + 1:]:
                s.shutdown()
                owned.remove(s)

    def _train_node(self, i, chunks, scheduler, callable_class, run_id, control) -> None:
        node = self.nodes[i]
        snapshot = copy.deepcopy(node)
        emit = scheduler.emit if scheduler is not None else (lambda event: None)
        try:
            while node.is_training():
                control.check()
                phase = node.phase
                fork = self._try_fork(node) if scheduler is not None else None
                emit(PhaseStarted(run_id, i, node.name, phase, local=fork is None,
                                  n_tasks=None if fork is None else known_length(chunks)))
                if fork is None:
                    self._train_phase_serial(i, chunks)
                    n_tasks = 0
                else:
                    n_tasks = self._train_phase_tasks(i, chunks, scheduler, fork, callable_class,
                                                      run_id, control)
                listening = scheduler is not None and scheduler.has_subscribers
                emit(PhaseFinished(run_id, i, node.name, phase, n_tasks,
                                   state=_view_state(node) if listening else None))
        except BaseException:
            emit(PhaseFinished(run_id, i, node.name, node.phase, 0, ok=False))
            restore_node(node, snapshot)
            raise

    @staticmethod
    def _try_fork(node):
        try:
            return node.fork()
        except NotForkableError:
            return None

    def _train_phase_tasks(self, i, chunks, scheduler, fork, callable_class, run_id,
                           control) -> int:
        """Run one phase as tasks; forks are joined into node ``i`` as they complete."""
        node, phase = self.nodes[i], self.nodes[i].phase
        task_callable = callable_class(self.nodes[:i], fork)

        plotted = [0.0]  # when the plot arrays were last computed

        def on_join():
            if not scheduler.has_subscribers:
                return
            # Views redraw at most 10 times a second: the arrays (an eigendecomposition
            # for PCA) are worth computing at most every PLOT_INTERVAL, counts always.
            now = time.monotonic()
            plots = now - plotted[0] >= PLOT_INTERVAL
            if plots:
                plotted[0] = now
            scheduler.emit(NodeJoined(run_id, i, node.name, phase, node.joins,
                                      _view_state(node, plots)))

        info = TaskInfo(run_id, -1, -1, "train", i, node.name, phase)
        n_tasks = self._run_tasks(scheduler, chunks, task_callable, info,
                                  JoinResultContainer(node, on_join), control)
        try:
            node.stop_training()
        except LabkitError as err:
            raise err.locate(node=i, node_name=node.name, phase=phase)
        return n_tasks

    @staticmethod
    def _run_tasks(scheduler, chunks, task_callable, info, container, control):
        """Submit every chunk lazily and wait for all; ``container.get_results()``.

        For a join container that is the number of joins: every task's.
        """
        with scheduler.exclusive():  # other runs on this scheduler wait for this batch
            previous = scheduler.result_container
            scheduler.result_container = container
            control.scheduler = scheduler
            try:
                count = 0
                for index, chunk in enumerate(chunks):
                    control.check()
                    scheduler.add_task(chunk, task_callable, info=_at_chunk(info, index))
                    count += 1
                if count == 0:
                    raise InputError(f"{info.node_name or 'execute'} got an empty data iterable",
                                     node=info.node, node_name=info.node_name, phase=info.phase)
                results = scheduler.get_results()
                control.check()
            except BaseException:
                scheduler.cancel()
                raise
            finally:
                control.scheduler = None
                scheduler.result_container = previous
        return results

    # -- execution ---------------------------------------------------------------

    def execute(self, iterable, scheduler=None, nodenr: int | None = None,
                execute_callable_class=None, wait: bool = True):
        """Execute chunks in parallel; the output keeps chunk order.

        Parameters
        ----------
        iterable : array, iterable of chunks, Dask array, or list of futures
        scheduler : Scheduler, optional
            In-process and serial when ``None``.
        nodenr : int, optional
            Execute nodes ``0..nodenr`` only.
        wait : bool
            ``False`` returns a :class:`Run` whose ``result()`` is the output.
        """
        nodes = self._executing_nodes(nodenr)
        chunks = as_chunks(iterable)
        owned = scheduler is None
        scheduler = scheduler if scheduler is not None else LocalScheduler()
        task_callable = (execute_callable_class or FlowExecuteCallable)(nodes)
        run_id = _new_run_id("execute")

        def job(control):
            try:
                return self._execute_all(nodes, chunks, scheduler, task_callable, run_id, control)
            finally:
                if owned:
                    scheduler.shutdown()

        if wait:
            return job(RunControl())
        return Run("execute", run_id, [scheduler], job)

    def _execute_all(self, nodes, chunks, scheduler, task_callable, run_id, control):
        scheduler.emit(RunStarted(run_id, "execute", len(nodes)))
        info = TaskInfo(run_id, -1, -1, "execute")
        try:
            results = self._run_tasks(scheduler, chunks, task_callable, info,
                                      OrderedResultContainer(), control)
            if task_callable.forking:
                results = [self._join_execute_forks(nodes, r) for r in results]
            output = np.concatenate(results)
        except BaseException as err:
            scheduler.emit(RunFinished(run_id, ok=False, error=str(err),
                                       cancelled=control.cancelled))
            raise
        scheduler.emit(RunFinished(run_id, ok=True))
        return output

    @staticmethod
    def _join_execute_forks(nodes, result):
        y, forks = result
        for index, forked in forks.items():
            nodes[index].join(forked)
        return y


def _at_chunk(info: TaskInfo, index: int) -> TaskInfo:
    """``info`` for chunk ``index``."""
    return dataclasses.replace(info, chunk=index)
