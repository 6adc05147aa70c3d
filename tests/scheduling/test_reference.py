"""Inputs by reference (labkit.scheduling.workers.reference): ByReference pickles as a token.

Unpickling the token in this process finds the same wrapper, so the object
is neither copied nor pickled by value; a wrapper nobody holds any more is
gone from the registry, and its token raises a LookupError saying so.
``unwrap`` takes the object out of a wrapper and leaves anything else alone.
"""

from __future__ import annotations

import gc
import pickle
import threading

import numpy as np
import pytest

import labkit as lk
from labkit.scheduling.workers.reference import ByReference, unwrap


def test_unpickling_in_this_process_finds_the_same_wrapper_and_object():
    chunk = np.arange(10.0)
    ref = ByReference(chunk)
    back = pickle.loads(pickle.dumps(ref))
    assert back is ref
    assert back.obj is chunk  # not a copy


def test_the_pickle_holds_a_token_not_the_object():
    big = np.zeros(1_000_000)
    data = pickle.dumps(ByReference(big), protocol=pickle.HIGHEST_PROTOCOL)
    assert len(data) < 200 < big.nbytes


def test_an_object_that_does_not_pickle_goes_by_reference():
    local = threading.Lock()  # a lock cannot be pickled by value
    with pytest.raises(TypeError):
        pickle.dumps(local)
    ref = ByReference(local)
    assert pickle.loads(pickle.dumps(ref)).obj is local


def test_a_function_defined_here_is_not_pickled_by_value():
    def made_here(x):
        return x + 1

    ref = ByReference(made_here)
    assert pickle.loads(pickle.dumps(ref)).obj(1) == 2


def test_every_wrapper_gets_its_own_token():
    refs = [ByReference(i) for i in range(50)]
    assert len({r.token for r in refs}) == 50
    assert [pickle.loads(pickle.dumps(r)).obj for r in refs] == list(range(50))


def test_tokens_stay_unique_when_threads_wrap_at_once():
    refs: list = []
    lock = threading.Lock()

    def wrap():
        made = [ByReference(None) for _ in range(200)]
        with lock:
            refs.extend(made)

    threads = [threading.Thread(target=wrap) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({r.token for r in refs}) == 800


def test_a_released_wrapper_raises_a_lookup_error_naming_its_token():
    ref = ByReference([1, 2, 3])
    token, data = ref.token, pickle.dumps(ref)
    del ref
    gc.collect()
    with pytest.raises(LookupError) as caught:
        pickle.loads(data)
    message = str(caught.value)
    assert str(token) in message
    assert "no longer held by this process" in message


def test_a_wrapper_is_held_only_while_someone_holds_it():
    chunk = [1]
    kept, dropped = ByReference(chunk), ByReference(chunk)
    kept_data, dropped_data = pickle.dumps(kept), pickle.dumps(dropped)
    del dropped
    gc.collect()
    assert pickle.loads(kept_data) is kept
    with pytest.raises(LookupError):
        pickle.loads(dropped_data)


def test_unwrap_returns_the_wrapped_object():
    chunk = np.ones(3)
    assert unwrap(ByReference(chunk)) is chunk
    assert unwrap(ByReference(None)) is None


def test_unwrap_leaves_anything_else_as_it_is():
    chunk = np.ones(3)
    assert unwrap(chunk) is chunk
    for value in (None, 0, "x", [1], (2,)):
        assert unwrap(value) is value


def test_unwrap_takes_off_one_layer_only():
    inner = ByReference("chunk")
    assert unwrap(ByReference(inner)) is inner


def test_an_in_process_worker_gets_the_very_chunk_not_a_copy():
    chunk = np.arange(6.0)
    seen = []

    def where_it_came_from(x):
        seen.append(x)
        return float(x.sum())

    with lk.DaskScheduler(mode="threads", n_workers=1, threads_per_worker=2) as s:
        s.add_task(chunk, where_it_came_from)
        assert s.get_results() == [15.0]
    assert seen[0] is chunk  # the very array, not an unpickled copy
