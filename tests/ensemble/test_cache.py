"""Inputs travel to each worker once; the cache folder is removed however the work ends."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest
from sklearn.linear_model import Ridge

import labkit as lk
from labkit.ensemble import FoldIndex, Layer, ParallelProcessing
from labkit.ensemble import cache as cache_module

from .reference import Boom, Sleepy

X = np.random.default_rng(0).normal(size=(2000, 50))
Y = X[:, 0] * 3.0 + 1.0

_unpickled = {"count": 0}  # per process: how many Inputs were unpickled here


def _counting_setstate(self, state):
    _unpickled["count"] += 1
    self.__dict__.update(state)


def _count_on_worker():
    from tests.ensemble import test_cache
    return test_cache._unpickled["count"]


def _install_counter():
    from labkit.ensemble.cache import Inputs
    from tests.ensemble import test_cache
    Inputs.__setstate__ = test_cache._counting_setstate
    test_cache._unpickled["count"] = 0


@pytest.mark.parametrize("cache", ["memory", "memmap"])
def test_each_input_reaches_each_worker_once_for_eight_tasks(dask_scheduler, cache,
                                                             monkeypatch, recorder):
    client = dask_scheduler.client
    client.run(_install_counter)
    pickled = []
    original = cache_module.Inputs.__getstate__
    monkeypatch.setattr(cache_module.Inputs, "__getstate__",
                        lambda self: pickled.append(1) or original(self))
    dask_scheduler.subscribe(recorder)
    layer = Layer([Ridge(alpha=1.0), ("ridge10", Ridge(alpha=10.0))], FoldIndex(3))
    ParallelProcessing(dask_scheduler, cache=cache).map(layer, X, Y)
    finished = recorder.of(lk.events.TaskFinished)
    assert len(finished) == 8  # 2 estimators x (3 folds + 1 final fit)
    assert len({e.worker for e in finished}) == 2  # both workers took part
    assert len(pickled) == 1  # serialised once on the client, for all 8 tasks
    per_worker = client.run(_count_on_worker)
    assert sorted(per_worker.values()) == [1, 1], per_worker  # each worker received it once


def test_no_cache_left_after_success_error_and_cancel(dask_scheduler, tmp_path):
    pp = ParallelProcessing(dask_scheduler, cache="memmap", cache_dir=str(tmp_path))
    seen = []
    original = cache_module.open_inputs

    def watching(*args, **kw):
        cm = original(*args, **kw)

        class Watch:
            def __enter__(self):
                inputs = cm.__enter__()
                seen.append(inputs.folder)
                assert os.path.isfile(os.path.join(inputs.folder, "X.npy"))
                return inputs

            def __exit__(self, *exc):
                return cm.__exit__(*exc)
        return Watch()

    import labkit.ensemble.fold_fits as fold_fits  # where each phase opens its inputs
    fold_fits.open_inputs = watching
    try:
        pp.map(Layer([Ridge()], FoldIndex(2)), X, Y)                       # success
        with pytest.raises(lk.TaskError, match="boom"):
            pp.map(Layer([Ridge(), Boom()], FoldIndex(2)), X, Y)           # an estimator raises
        slow = Layer([(f"s{i}", Sleepy(0.3)) for i in range(8)], FoldIndex(2))
        errors = []
        worker = threading.Thread(target=lambda: _catch(errors, pp.map, slow, X, Y))
        worker.start()
        while not seen or len(seen) < 3:
            time.sleep(0.01)
        time.sleep(0.4)
        pp.cancel()                                                          # cancelled
        worker.join(30)
        assert not worker.is_alive() and isinstance(errors[0], lk.CancelledError)
    finally:
        fold_fits.open_inputs = original
    assert len(seen) == 3
    assert list(tmp_path.iterdir()) == [] and not any(os.path.exists(f) for f in seen)
    assert pp.map(Layer([Ridge()], FoldIndex(2)), X, Y).shape == (2000, 1)  # usable after


def _catch(errors, fn, *args):
    try:
        fn(*args)
    except BaseException as exc:  # the test looks at it
        errors.append(exc)


def test_a_cache_that_cannot_be_removed_is_a_warning_naming_it(local_scheduler, tmp_path,
                                                               monkeypatch):
    def refuse(path, onerror=None):
        raise PermissionError(13, "Permission denied", path)
    monkeypatch.setattr(cache_module.shutil, "rmtree", refuse)
    pp = ParallelProcessing(local_scheduler, cache="memmap", cache_dir=str(tmp_path))
    with pytest.warns(RuntimeWarning, match="could not remove the ensemble cache") as warned:
        pp.map(Layer([Ridge()], FoldIndex(2)), X, Y)
    folder = [p for p in tmp_path.iterdir()][0]
    assert str(folder) in str(warned[0].message)
    monkeypatch.undo()
    cache_module._remove(str(folder))
    assert list(tmp_path.iterdir()) == []


def test_auto_cache_memory_maps_for_local_dask_workers(dask_scheduler, local_scheduler):
    assert ParallelProcessing(dask_scheduler).mode == "memmap"
    assert ParallelProcessing(local_scheduler).mode == "memory"


def test_workers_drop_their_maps_when_the_cache_goes(dask_scheduler, tmp_path):
    pp = ParallelProcessing(dask_scheduler, cache="memmap", cache_dir=str(tmp_path))
    pp.map(Layer([Ridge()], FoldIndex(2)), X, Y)
    mine = str(tmp_path)
    # other tests share the cluster: look at this run's maps, and at maps of deleted files
    held = dask_scheduler.client.run(
        lambda: [p for p in cache_module._MAPPED if p.startswith(mine) or not os.path.exists(p)])
    assert list(held.values()) == [[], []]
    assert list(tmp_path.iterdir()) == []
