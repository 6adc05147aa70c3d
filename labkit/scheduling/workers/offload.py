"""Worker processes for tasks that hold the GIL, beside an in-process cluster.

An in-process (threaded) cluster passes chunks by reference and runs numpy
and BLAS work on all cores, but two threads running pure-Python code take
turns on the GIL.  A task whose callable says ``holds_gil`` therefore runs in
one of these processes instead: the worker thread that got it copies the
chunk's arrays once into shared memory (the process maps them: no pickling,
nothing through the pipe; segments are reused, see :mod:`.shared`), sends the callable (pickled once per callable),
waits without the GIL, and returns what the process sends back.  Only such
tasks pay for a process.

The processes start on first use (spawned: the client process has threads),
use one BLAS thread each, and are ended when the scheduler shuts down, or
when the process that started them dies (see :mod:`.lifeline`).  When a
process dies under a task (killed, ``os._exit``, a segfault), a fresh pool
runs the task again, and the tasks that were waiting in the broken one; a
task under which processes die :attr:`OffloadPool.max_attempts` times raises
:class:`~labkit.errors.WorkerLostError`.

Examples
--------
>>> pool = OffloadPool(1)
>>> pool.close()   # nothing was started
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import multiprocessing
import os
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import cloudpickle

from ...errors import InputError, WorkerLostError
from ..tasks.pickling import pickling_cause, root_cause, unpicklable_part
from .lifeline import hold_lifeline
from .pools import offload_pool, register_pool, unregister_pool
from .running import run_task
from .shared import SharedChunks

__all__ = ["OffloadPool", "offload_pool"]

logger = logging.getLogger("labkit.scheduling")

_tokens = itertools.count()
_CALLABLES: dict[int, Any] = {}  # in a pool process: callable token -> callable


class OffloadPool:
    """A lazily started pool of ``size`` spawned processes, registered under a token."""

    #: Runs of one task a pool process may die under before the task fails (as
    #: Dask's ``allowed-failures``: a task that kills its process must not loop).
    max_attempts = 3

    def __init__(self, size: int):
        self.size = max(1, int(size))
        self.token = f"labkit-offload-{next(_tokens)}"
        self._executor: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()
        # id -> (callable, its token, its pickle); a token is never reused, unlike an id
        self._pickled: dict[int, tuple[object, int, bytes]] = {}
        self._closed = False
        self._shared = SharedChunks()  # chunk segments, reused from task to task
        register_pool(self.token, self)

    def run(self, task_callable, data, info, worker: str):
        """Run one task in a pool process; its outcome, or its error raised here.

        A process lost under the task (and under the tasks beside it, which the
        broken pool fails too) costs a run in a fresh pool, up to ``max_attempts``.
        """
        token, blob = self._pickle(task_callable)
        for attempt in itertools.count(1):
            executor = self._ensure()
            try:
                return self._run_once(executor, token, blob, data, info, worker)
            except BrokenProcessPool as exc:
                self._replace(executor)
                if attempt >= self.max_attempts:
                    raise WorkerLostError(
                        f"worker lost: a process running this GIL-holding task died {attempt} "
                        "times (killed, os._exit, a segfault or running out of memory)",
                        **info.where(),
                        worker=f"{worker} (offload process)",
                    ) from exc
                logger.warning(
                    "labkit: an offload process died under chunk %s of %s; "
                    "running it again in a fresh process (attempt %d)",
                    info.chunk,
                    info.run,
                    attempt + 1,
                )
        raise AssertionError("unreachable")

    def _run_once(self, executor, token: int, blob: bytes, data, info, worker: str):
        """One run of a task in ``executor``; the chunk's segments are dropped afterwards."""
        task, reuse = next(_tokens), False
        try:
            sent = self._shared.chunk_for(task, data)
            outcome = cloudpickle.loads(
                executor.submit(_run_there, token, blob, sent, info, worker).result()
            )
            reuse = outcome.released is True  # the process kept no view of the chunk
            return dataclasses.replace(outcome, released=None)
        finally:
            self._shared.drop([task], reuse)

    def close(self) -> None:
        """End the processes; idempotent."""
        with self._lock:
            self._closed = True
            executor, self._executor = self._executor, None
            self._pickled.clear()
        unregister_pool(self.token)
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)
        self._shared.drop_all()

    @property
    def started(self) -> bool:
        """Whether processes were started."""
        return self._executor is not None

    def pids(self) -> list[int]:
        """Process ids of the pool's live processes."""
        executor = self._executor
        return sorted(getattr(executor, "_processes", {}) or {}) if executor else []

    def _pickle(self, task_callable) -> tuple[int, bytes]:
        """The callable's token and pickle, made once per callable."""
        with self._lock:
            held = self._pickled.get(id(task_callable))
            if held is None or held[0] is not task_callable:
                if len(self._pickled) > 64:  # callables of finished phases
                    self._pickled.clear()
                held = self._pickled[id(task_callable)] = (
                    task_callable,
                    next(_tokens),
                    _dumps(task_callable),
                )
        return held[1], held[2]

    def _ensure(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._closed:
                raise RuntimeError("the offload pool is closed")
            if self._executor is None:
                self._executor = ProcessPoolExecutor(
                    self.size,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=_init_process,
                    initargs=(os.getpid(),),
                )
            return self._executor

    def _replace(self, broken) -> None:
        with self._lock:
            if self._executor is broken:
                self._executor = None
        broken.shutdown(wait=False, cancel_futures=True)


def _dumps(task_callable) -> bytes:
    """The callable's pickle, or an ``InputError`` naming the user's part that does not pickle."""
    try:
        return cloudpickle.dumps(task_callable)
    except Exception as exc:
        root = pickling_cause(exc) or root_cause(exc)
        raise InputError(
            f"{unpicklable_part(task_callable)} cannot be sent to a process for GIL-holding "
            f"tasks: {type(root).__name__}: {root}"
        ) from exc


def _init_process(parent: int) -> None:
    """In a pool process, first: end with ``parent``; one BLAS thread."""
    hold_lifeline(parent)
    from threadpoolctl import threadpool_limits  # only in a pool process

    threadpool_limits(limits=1)  # as Dask's nanny does for its worker processes


def _run_there(token: int, blob: bytes, data, info, worker: str):
    """In a pool process: the callable of ``token`` (unpickled once here), run on the chunk."""
    task_callable = _CALLABLES.get(token)
    if task_callable is None:
        if len(_CALLABLES) > 64:
            _CALLABLES.clear()
        task_callable = _CALLABLES[token] = cloudpickle.loads(blob)  # a TaskCallable
    # cloudpickle: a node class defined in a notebook lives in no module here
    return cloudpickle.dumps(run_task(task_callable, data, info, worker=worker))
