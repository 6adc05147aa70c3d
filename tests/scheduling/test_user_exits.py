"""``sys.exit()`` or a ``KeyboardInterrupt`` in user code fails its own task, on every route.

Both are ``BaseException`` s, not ``Exception`` s: let through, they ended a
Dask worker thread (a packed task's ``get_results()`` never returned, the
in-process cluster's event loop died and ``shutdown()`` raised "IOLoop is
closed").  Each route here fails the task with a labkit error naming its
chunk, and the scheduler still runs the next batch and shuts down cleanly.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

import labkit as lk
from labkit.errors import TaskError

BAD = 5


def _exits(x):
    if x == BAD:
        sys.exit(3)
    return x


def _interrupts(x):
    if x == BAD:
        raise KeyboardInterrupt
    return x


class GilExit(lk.TaskCallable):
    """Pure Python: on ``mode="auto"`` it runs in the offload pool's processes."""

    holds_gil = True

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, x):
        return self.fn(x)


def _square(x):
    return x * x


def _fails_located(s, fn, n: int) -> None:
    """``fn`` over ``range(n)`` fails naming chunk BAD; the scheduler still works after."""
    with pytest.raises(TaskError) as info:
        with s.batch() as b:
            b.add_tasks(range(n), fn, ready=True)
            b.get_results()
    err = info.value
    assert err.where.get("chunk") == BAD, str(err)
    assert err.original_type in ("SystemExit", "KeyboardInterrupt"), str(err)
    with s.batch() as b:  # the workers and the event loop are alive
        b.add_tasks(range(8), _square, ready=True)
        assert sorted(b.get_results()) == [x * x for x in range(8)]


@pytest.mark.parametrize("fn", [_exits, _interrupts])
def test_local_scheduler(fn):
    with lk.LocalScheduler() as s:
        _fails_located(s, fn, 10)


@pytest.mark.parametrize("fn", [_exits, _interrupts])
def test_threads_one_task_a_dask_task(fn):
    s = lk.DaskScheduler(mode="threads", n_workers=1, threads_per_worker=2)
    try:
        _fails_located(s, fn, 10)  # nothing measured yet: no packs
    finally:
        s.shutdown()  # raised "IOLoop is closed" before


class InPack:
    """``fn``, noting whether the Dask task running it is a pack of several."""

    def __init__(self, fn):
        self.fn, self.packed = fn, False

    def __call__(self, x):
        from distributed import get_worker

        if str(get_worker().get_current_task()).endswith("-pack"):
            self.packed = True
        return self.fn(x)


@pytest.mark.parametrize("fn", [_exits, _interrupts])
def test_threads_packed_tasks(fn):
    s = lk.DaskScheduler(mode="threads", n_workers=1, threads_per_worker=2)
    task = InPack(fn)
    try:
        with s.batch() as b:  # the clock times the callable: its next groups are packed
            b.add_tasks([x for x in range(64) if x != BAD], task, ready=True)
            b.get_results()
        _fails_located(s, task, 640)
        assert task.packed, "the tasks were not packed: this test tests nothing"
    finally:
        s.shutdown()


@pytest.mark.parametrize("fn", [_exits, _interrupts])
def test_worker_processes(fn):
    with lk.DaskScheduler(mode="processes", n_workers=2) as s:
        _fails_located(s, fn, 10)


@pytest.mark.parametrize("fn", [_exits, _interrupts])
def test_auto_mode_process_pool(fn):
    with lk.DaskScheduler(mode="auto", n_workers=1, threads_per_worker=2) as s:
        _fails_located(s, GilExit(fn), 10)


class ExitingNode(lk.Node):
    """A node whose training hook calls ``sys.exit()`` on one chunk."""

    def _train(self, x):
        if x[0, 0] == BAD:
            sys.exit(4)
        self.rows = getattr(self, "rows", 0) + len(x)

    def _fork(self):
        return ExitingNode()

    def _join(self, forked):
        self.rows = getattr(self, "rows", 0) + getattr(forked, "rows", 0)


@pytest.mark.parametrize("mode", ["local", "threads"])
def test_a_flows_node_hook(mode):
    chunks = [np.full((4, 2), float(i)) for i in range(10)]
    s = lk.LocalScheduler() if mode == "local" else lk.DaskScheduler(mode="threads", n_workers=1)
    try:
        with pytest.raises(TaskError) as info:
            lk.ParallelFlow([ExitingNode()]).train([chunks], scheduler=s)
        assert info.value.original_type == "SystemExit"
        assert "ExitingNode._train" in str(info.value) and info.value.where.get("chunk") == BAD
        with s.batch() as b:
            b.add_tasks(range(4), _square, ready=True)
            assert sorted(b.get_results()) == [0, 1, 4, 9]
    finally:
        s.shutdown()


class ExitingFit:
    """A scikit-learn regressor whose fit calls ``sys.exit()``."""

    def __init__(self):
        pass

    def get_params(self, deep=True):
        return {}

    def set_params(self, **params):
        return self

    def fit(self, X, y):
        sys.exit(5)

    def predict(self, X):
        return np.zeros(len(X))


def test_an_estimator_calling_sys_exit_fails_its_fit_named():
    from labkit.ensemble import FoldIndex, Layer, ParallelProcessing

    x = np.random.default_rng(0).normal(size=(40, 3))
    with lk.LocalScheduler() as s:
        with pytest.raises(TaskError) as info:
            ParallelProcessing(s).map(Layer([("quits", ExitingFit())], FoldIndex(2)), x, x.sum(1))
    assert info.value.original_type == "SystemExit"
    assert info.value.where.get("estimator") == "quits", str(info.value)
