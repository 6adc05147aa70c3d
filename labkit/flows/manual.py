"""The seed's manual task API for parallel flows.

For users who drive a scheduler themselves::

    flow.setup_parallel_training(data_iterables)
    while flow.is_parallel_training:
        while flow.task_available:
            scheduler.add_task(*flow.get_task())
        flow.use_results(scheduler.get_results())

Phases of nodes that cannot fork are trained locally while advancing, so
the loop only ever sees parallel phases.  Execution works the same way with
``setup_parallel_execution``; its ``use_results`` returns the output.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from ..errors import InputError, LabkitError, NotForkableError, TrainingError
from .callables import FlowExecuteCallable, FlowTrainCallable, join_execute_forks
from .chunks import as_chunks
from .flow import Flow

__all__ = ["ManualTasksMixin"]

_END = object()


class _Tasks:
    """A lookahead over one chunk source, paired with the callable for its tasks."""

    def __init__(self, chunks: Iterable[Any], task_callable: Any):
        self._chunks: Iterator[Any] = iter(chunks)
        self.task_callable = task_callable
        self.next = next(self._chunks, _END)

    def available(self) -> bool:
        return self.next is not _END

    def take(self) -> tuple[Any, Any]:
        chunk, self.next = self.next, next(self._chunks, _END)
        return chunk, self.task_callable


@dataclasses.dataclass
class _Run:
    """A manual run set up: training (phases planned) or execution."""

    mode: str  # "train" or "execute"
    tasks: _Tasks | None = None
    plan: list[tuple[int, Any]] = dataclasses.field(default_factory=list)  # node, its chunks
    callable_class: Any = FlowTrainCallable
    nodes: list[Any] = dataclasses.field(default_factory=list)  # those executed


def _result_list(results: Any) -> list[Any]:
    """``results`` (what ``scheduler.get_results()`` returned) as a list, or an InputError."""
    if isinstance(results, (str, bytes)) or not hasattr(results, "__iter__"):
        raise InputError(
            "use_results takes the list scheduler.get_results() returned, got "
            f"{type(results).__name__}",
            argument="results",
        )
    return list(results)


class ManualTasksMixin(Flow):
    """``setup_parallel_training``, ``get_task``, ``use_results`` and friends."""

    _manual: _Run | None = None  # while a manual run is set up

    def setup_parallel_training(
        self, data_iterables: Any, train_callable_class: Any = None, resume: bool = False
    ) -> None:
        """Prepare manual parallel training; trains non-forking phases locally."""
        sources = self._check_training(data_iterables, resume)
        plan = [(i, chunks) for i, chunks in enumerate(sources) if chunks is not None]
        self._manual = _Run(
            "train", plan=plan, callable_class=train_callable_class or FlowTrainCallable
        )
        self._advance_training()

    def setup_parallel_execution(
        self, iterable: Any, nodenr: int | None = None, execute_callable_class: Any = None
    ) -> None:
        """Prepare manual parallel execution of ``iterable``."""
        nodes = self._executing_nodes(nodenr)
        task_callable = (execute_callable_class or FlowExecuteCallable)(nodes)
        self._manual = _Run(
            "execute", tasks=_Tasks(as_chunks(iterable), task_callable), nodes=nodes
        )

    @property
    def is_parallel_training(self) -> bool:
        """Whether a manual training run has phases left."""
        return self._manual is not None and self._manual.mode == "train"

    @property
    def is_parallel_executing(self) -> bool:
        """Whether a manual execution is set up and not yet used."""
        return self._manual is not None and self._manual.mode == "execute"

    @property
    def task_available(self) -> bool:
        """Whether ``get_task`` has another task for the current phase."""
        tasks = self._manual.tasks if self._manual else None
        return tasks is not None and tasks.available()

    def get_task(self) -> tuple[Any, Any]:
        """The next ``(chunk, task_callable)`` pair, ready for ``scheduler.add_task``."""
        tasks = self._manual.tasks if self._manual else None
        if tasks is None or not tasks.available():
            raise TrainingError(
                "no task available: call use_results with the results of "
                "the current phase, or set up a run first"
            )
        return tasks.take()

    def use_results(self, results: Any) -> Any:
        """Use the results of the current phase (training) or of execution."""
        run = self._manual
        if run is None:
            raise TrainingError("use_results without setup_parallel_training/execution")
        results = _result_list(results)
        if run.mode == "execute":
            if not results:
                raise InputError(
                    "use_results got no results to execute: add a task for each "
                    "get_task() and pass what scheduler.get_results() returns"
                )
            self._manual = None
            return self._join_manual_execute(run, results)
        i = run.plan[0][0]
        node = self.nodes[i]
        try:
            for forked in results:  # all checked first: a bad one leaves the node as it was
                node.check_fork(forked)
            for forked in results:
                node.join(forked)
            node.stop_training()
        except LabkitError as err:
            err.locate(node=i, node_name=node.name)
            raise  # the same error, located
        self._advance_training()
        return None

    @staticmethod
    def _join_manual_execute(run: _Run, results: list[Any]) -> np.ndarray:
        assert run.tasks is not None  # an execution run has its tasks from the start
        if run.tasks.task_callable.forking:
            results = [join_execute_forks(run.nodes, r) for r in results]
        return np.concatenate(results)

    def _advance_training(self) -> None:
        """Move to the next phase that runs as tasks, training local phases on the way."""
        run = self._manual
        while run is not None and run.plan:
            i, chunks = run.plan[0]
            node = self.nodes[i]
            if not node.is_training():
                self._after_node(i)
                run.plan.pop(0)
                continue
            try:
                fork = node.fork()
            except NotForkableError:
                self._train_phase_serial(i, chunks)
                continue
            run.tasks = _Tasks(chunks, run.callable_class(self.nodes[:i], fork))
            return
        self._manual = None
