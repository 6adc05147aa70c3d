"""Errors about what labkit ships name the user's object, never labkit's wrapper.

An unpicklable estimator in an ensemble on worker processes was
"<labkit.ensemble.tasks.FitCallable object at 0x…>"; a pipe whose reducer
failed named the internal stage ``_identity``.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from sklearn.linear_model import Ridge

import labkit as lk
from labkit.ensemble import FoldIndex, Layer, ParallelProcessing
from labkit.pipeline import PipelineError, pipe_and_output


class Handle:
    """Something of this process only (a lock, a connection): copied, never pickled."""

    def __deepcopy__(self, memo):
        return Handle()

    def __reduce__(self):
        raise TypeError("cannot pickle a Handle")


class Locked(Ridge):
    """An estimator holding a handle: it cannot be sent to another process."""

    def __init__(self, alpha=1.0):
        super().__init__(alpha=alpha)
        self.handle = Handle()


class LockedPCA(lk.nodes.PCA):
    """A node holding a handle."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.handle = Handle()

    def _fork(self):
        forked = super()._fork()
        forked.handle = Handle()
        return forked


def _internal(message: str) -> bool:
    return "object at 0x" in message or "labkit." in message or "Callable" in message


@pytest.fixture(scope="module")
def processes():
    with lk.DaskScheduler(mode="processes", n_workers=2) as s:
        yield s


def _data():
    x = np.random.default_rng(0).normal(size=(60, 3))
    return x, x.sum(1)


def test_an_unpicklable_estimator_is_named(processes, capfd):
    with pytest.raises(lk.InputError) as info:
        ParallelProcessing(processes).map(Layer([("locked", Locked())], FoldIndex(2)), *_data())
    message = str(info.value)
    assert "estimator 'locked' (Locked)" in message and "a Handle" in message, message
    assert not _internal(message), message
    assert "FitCallable" not in capfd.readouterr().err   # no log of Dask's about our wrapper


def test_an_unpicklable_node_is_named(processes):
    chunks = [np.random.default_rng(i).normal(size=(20, 3)) for i in range(4)]
    flow = lk.ParallelFlow([lk.nodes.PCA(output_dim=2), LockedPCA(output_dim=1)])
    with pytest.raises(lk.InputError) as info:
        flow.train([chunks, chunks], scheduler=processes)
    message = str(info.value)
    assert "node 1 (LockedPCA)" in message, message
    assert not _internal(message), message


def test_an_unpicklable_task_function_is_named(processes):
    lock = threading.Lock()

    def uses_a_lock(x):
        with lock:
            return x

    with pytest.raises(lk.InputError) as info:
        processes.add_task(1, uses_a_lock)
    assert "uses_a_lock" in str(info.value) and not _internal(str(info.value))


def test_a_gil_holding_unpicklable_callable_on_the_auto_mode_is_named():
    lock = threading.Lock()

    def pure_python(x):
        with lock:
            return x

    with lk.DaskScheduler(mode="auto", n_workers=1, threads_per_worker=2) as s:
        with pytest.raises(lk.InputError) as info:
            s.add_task(1, lk.FunctionCallable(pure_python, holds_gil=True))
            s.get_results()
    assert "pure_python" in str(info.value) and not _internal(str(info.value))


@pytest.mark.parametrize("processor", [None, abs])
def test_a_failing_reducer_is_named_not_the_internal_stage(processor):
    def total(acc, record):
        raise ValueError("no total today")

    q, final = pipe_and_output(range(5), num_threads=2, processor=processor,
                               final_outputs={"total": total})
    with pytest.raises(PipelineError) as read:
        list(q)
    with pytest.raises(PipelineError) as info:
        final.result(timeout=30)
    for err in (read.value, info.value):
        assert "_identity" not in str(err) and "final output 'total'" in str(err), str(err)
        assert err.where["output"] == "total"
        assert err.where["stage"] == ("pipe" if processor is None else "abs")


def test_a_callable_whose_parts_all_pickle_is_named_by_its_parts_not_its_wrapper():
    """A ship that fails for another reason (the client closing) names the user's parts."""
    from labkit.scheduling.tasks.pickling import unpicklable_part

    class Carrying(lk.TaskCallable):
        def parts(self):
            return {"node 0 'PCA'": lk.nodes.PCA(), "node 1 'SFA'": lk.nodes.SFA()}

        def __call__(self, chunk):
            return chunk

    class Bare(lk.TaskCallable):
        def __call__(self, chunk):
            return chunk

    assert unpicklable_part(Carrying()) == "node 0 'PCA', node 1 'SFA'"
    assert unpicklable_part(Bare()).startswith("<")  # no parts: its own repr, as before
