"""Task inputs handed over by reference to workers that are threads of this process.

Dask pickles every task it is given, also for an in-process cluster, where
the "worker" unpickles it again in the same process.  For a chunk that costs
little (numpy pickles its buffer out of band), but a lazy chunk's small graph
names the function that makes the block, and a function defined in a notebook
or a script is pickled by value, its code and globals, once per task (about
half a millisecond each, bench_core [2]).  :class:`ByReference` pickles to a
token instead; unpickling it in this process finds the same object again.

The registry holds the wrappers weakly: the scheduler keeps each task's
wrapper until the task is done, so nothing outlives its task.

Examples
--------
>>> import pickle
>>> chunk = [1, 2, 3]
>>> ref = ByReference(chunk)
>>> pickle.loads(pickle.dumps(ref)).obj is chunk
True
"""

from __future__ import annotations

import itertools
import threading
import weakref

__all__ = ["ByReference", "unwrap"]

_registry: weakref.WeakValueDictionary[int, ByReference] = weakref.WeakValueDictionary()
_tokens = itertools.count()
_lock = threading.Lock()


class ByReference:
    """``obj``, pickled as a token that only this process can resolve."""

    __slots__ = ("obj", "token", "__weakref__")

    def __init__(self, obj):
        self.obj = obj
        with _lock:
            self.token = next(_tokens)
            _registry[self.token] = self

    def __reduce__(self):
        return _resolve, (self.token,)


def _resolve(token: int) -> ByReference:
    """The wrapper registered under ``token`` (it lives as long as its task)."""
    ref = _registry.get(token)
    if ref is None:  # only if a task outlived its scheduler's bookkeeping
        raise LookupError(f"labkit: task input {token} is no longer held by this process")
    return ref


def unwrap(data):
    """``data``'s object if it came by reference, else ``data``."""
    return data.obj if isinstance(data, ByReference) else data
