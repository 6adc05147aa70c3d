"""Result containers (labkit.scheduling.tasks.results): what they collect, return and refuse.

A ListResultContainer keeps completion order, an OrderedResultContainer
task-index order; ``get_results`` hands over and starts afresh.  Anything
with ``add_result`` and ``get_results`` is a container (the RESULT_CONTAINER
rule); anything else is refused at once, naming the argument.
"""

from __future__ import annotations

import pytest

import labkit as lk
from labkit.errors import InputError
from labkit.events import TaskInfo
from labkit.scheduling.tasks.results import (
    RESULT_CONTAINER,
    ListResultContainer,
    OrderedResultContainer,
    ResultContainer,
    check_container,
    discard,
)


class DuckContainer:
    """A container by its methods only, without ``discard``."""

    def __init__(self):
        self.items = []

    def add_result(self, result, task_index):
        self.items.append((task_index, result))

    def get_results(self):
        items, self.items = self.items, []
        return {index: result for index, result in items}


def test_the_containers_are_exported_by_labkit():
    assert lk.ListResultContainer is ListResultContainer
    assert lk.OrderedResultContainer is OrderedResultContainer
    assert issubclass(OrderedResultContainer, ResultContainer)


def test_a_list_container_keeps_completion_order():
    c = ListResultContainer()
    for result, index in [("c", 2), ("a", 0), ("b", 1)]:
        c.add_result(result, index)
    assert c.get_results() == ["c", "a", "b"]


def test_an_ordered_container_sorts_by_task_index():
    c = OrderedResultContainer()
    for result, index in [("c", 2), ("a", 0), ("d", 10), ("b", 1)]:
        c.add_result(result, index)
    assert c.get_results() == ["a", "b", "c", "d"]


def test_an_ordered_container_sorts_results_that_do_not_compare():
    c = OrderedResultContainer()
    c.add_result({"b": 1}, 1)
    c.add_result({"a": 0}, 0)
    assert c.get_results() == [{"a": 0}, {"b": 1}]


@pytest.mark.parametrize("cls", [ListResultContainer, OrderedResultContainer])
def test_get_results_hands_over_and_starts_afresh(cls):
    c = cls()
    assert c.get_results() == []
    c.add_result(1, 0)
    first = c.get_results()
    assert first == [1] and c.get_results() == []
    c.add_result(2, 0)
    assert c.get_results() == [2]
    assert first == [1]  # what was handed over is not changed later


@pytest.mark.parametrize("cls", [ListResultContainer, OrderedResultContainer])
def test_discard_drops_partial_results(cls):
    c = cls()
    c.add_result("partial", 0)
    c.discard()
    assert c.get_results() == []


def test_the_base_container_leaves_both_methods_to_subclasses():
    base = ResultContainer()
    with pytest.raises(NotImplementedError):
        base.add_result(1, 0)
    with pytest.raises(NotImplementedError):
        base.get_results()


def test_discard_uses_get_results_for_a_container_without_discard():
    duck = DuckContainer()
    duck.add_result("x", 3)
    discard(duck)
    assert duck.get_results() == {}


def test_discard_prefers_the_containers_own_discard():
    class Keeps(ListResultContainer):
        def discard(self):
            self.discarded = True

    c = Keeps()
    c.add_result("kept", 0)
    discard(c)
    assert c.discarded and c.get_results() == ["kept"]


@pytest.mark.parametrize("good", [None, ListResultContainer(), OrderedResultContainer(),
                                  DuckContainer()])
def test_check_container_returns_what_it_accepts(good):
    assert check_container(good) is good
    assert good is None or RESULT_CONTAINER.accepts(good)


class NoGet:
    def add_result(self, result, task_index):
        pass


class NotCallable:
    add_result = get_results = 1


@pytest.mark.parametrize("bad", [[], {}, "results", 3, NoGet(), NotCallable()])
def test_check_container_refuses_what_cannot_take_results(bad):
    assert not RESULT_CONTAINER.accepts(bad)
    with pytest.raises(InputError) as caught:
        check_container(bad)
    assert caught.value.where.get("argument") == "result_container"
    message = str(caught.value)
    assert "result_container must be" in message and "add_result and get_results" in message
    assert type(bad).__name__ in message


def test_schedulers_and_batches_refuse_a_bad_container_at_once():
    with pytest.raises(InputError, match="result_container"):
        lk.LocalScheduler(result_container=[])
    with lk.LocalScheduler() as s:
        with pytest.raises(InputError, match="result_container"):
            s.batch(result_container=NoGet())
        with pytest.raises(InputError, match="result_container"):
            s.result_container = "results"
        assert isinstance(s.result_container, ListResultContainer)


def test_a_scheduler_fills_an_ordered_container_by_chunk():
    with lk.LocalScheduler(result_container=OrderedResultContainer()) as s:
        for chunk in (2, 0, 1):
            s.add_task(chunk, lambda x: x * 10, info=TaskInfo("r", -1, chunk))
        assert s.get_results() == [0, 10, 20]
        assert s.get_results() == []


def test_a_batch_hands_its_container_results_over():
    with lk.LocalScheduler() as s, s.batch(DuckContainer()) as b:
        b.add_tasks([5, 6, 7], lambda x: -x, ready=True)
        assert b.get_results() == {0: -5, 1: -6, 2: -7}


def test_a_scheduler_with_a_list_container_keeps_completion_order():
    with lk.LocalScheduler(result_container=ListResultContainer()) as s:
        for chunk in (2, 0, 1):
            s.add_task(chunk, lambda x: x * 10, info=TaskInfo("r", -1, chunk))
        assert s.get_results() == [20, 0, 10]  # LocalScheduler completes in order given


def test_a_container_class_instead_of_an_instance_is_refused():
    with pytest.raises(InputError):
        check_container(OrderedResultContainer)
