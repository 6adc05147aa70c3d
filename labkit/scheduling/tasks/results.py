"""Result containers: where a scheduler puts results as tasks complete.

A container's ``add_result`` is called once per task, serialised by the
scheduler, in completion order; ``get_results`` hands over what was collected
and starts afresh.  Flows use containers that join forked nodes on arrival.
"""

from __future__ import annotations

from typing import Any

from ...constraints import HasMethods, check_argument

__all__ = [
    "ResultContainer",
    "ListResultContainer",
    "OrderedResultContainer",
    "check_container",
    "discard",
    "RESULT_CONTAINER",
]

#: The rule of a result container: anything with ``add_result`` and ``get_results``.
RESULT_CONTAINER = HasMethods(
    ("add_result", "get_results"),
    "a ResultContainer (add_result and get_results), e.g. lk.OrderedResultContainer()",
)


def check_container(container) -> Any:
    """``container`` if it can take results (``add_result``, ``get_results``), else an
    InputError naming the argument: given at once, not failing in the first task's completion.
    """
    return check_argument("result_container", container, [RESULT_CONTAINER, None])


def discard(container) -> None:
    """Drop ``container``'s partial results (``get_results`` for one without ``discard``)."""
    getattr(container, "discard", container.get_results)()


class ResultContainer:
    """Base of result containers."""

    def add_result(self, result: Any, task_index: int) -> None:
        """Take the result of the task with index ``task_index``."""
        raise NotImplementedError

    def get_results(self) -> Any:
        """Hand over the collected results and start afresh."""
        raise NotImplementedError

    def discard(self) -> None:
        """Drop partial results (after a failure or cancel)."""
        self.get_results()


class ListResultContainer(ResultContainer):
    """Results in the order the tasks completed.

    Examples
    --------
    >>> c = ListResultContainer()
    >>> c.add_result("b", 1); c.add_result("a", 0)
    >>> c.get_results()
    ['b', 'a']
    """

    def __init__(self):
        self._results: list = []

    def add_result(self, result, task_index):
        self._results.append(result)

    def get_results(self):
        results, self._results = self._results, []
        return results


class OrderedResultContainer(ListResultContainer):
    """Results in task-index order, whatever order the tasks completed in.

    Examples
    --------
    >>> c = OrderedResultContainer()
    >>> c.add_result("b", 1); c.add_result("a", 0)
    >>> c.get_results()
    ['a', 'b']
    """

    def add_result(self, result, task_index):
        self._results.append((task_index, result))

    def get_results(self):
        pairs, self._results = self._results, []
        return [result for _, result in sorted(pairs, key=lambda pair: pair[0])]
