"""Long tasks told at once when their worker closes, so that it closes in time.

A long task (a sweep's slot, a rank's loop) holds a thread of its worker's
pool.  A worker that closes (its scheduler shut down, a retirement, the end
of its ``lifetime``) waits for its pool's threads before its process exits;
its nanny kills the process after 4 s ("Worker process still alive after 4.0
seconds, killing") and, for a lifetime's restart, never starts it again.

:func:`on_close` registers a callback that runs when the worker of the
calling task begins to close: Dask tears a worker's plugins down before it
waits for its pool, and the first call installs one (:class:`CloseWatch`) on
the worker.  The callback runs on the worker's event loop: it must only
signal (set an event, shut a socket), never wait.  A worker already closing
calls it at once.

A task that must not hold its worker's close while user code runs (a long
step of a trial) runs that code on a thread of its own and waits for it or
for the close, whichever comes first; :func:`as_in_this_task` makes that
thread see what the task's thread sees (the worker, the task's key).
"""

from __future__ import annotations

import contextvars
import functools
import itertools
import logging
import threading
from collections.abc import Callable

__all__ = [
    "on_close",
    "as_in_this_task",
    "CloseWatch",
    "PLUGIN",
]

logger = logging.getLogger("labkit.scheduling")

#: The name of labkit's plugin on a worker.
PLUGIN = "labkit-close"

#: Seconds the installing of the plugin may take (the worker's event loop answers it).
INSTALL_WAIT = 30.0

_installing = threading.Lock()


class CloseWatch:
    """What tasks of a worker asked to be called at its close; its plugin's teardown calls them."""

    def __init__(self):
        self._lock = threading.Lock()
        self._calls: dict[int, Callable[[], None]] = {}
        self._keys = itertools.count()
        self.closing = False

    def add(self, fn: Callable[[], None]) -> int | None:
        """Call ``fn`` at the worker's close; its key, or None when the worker closes already."""
        with self._lock:
            if self.closing:
                return None
            key = next(self._keys)
            self._calls[key] = fn
            return key

    def remove(self, key: int) -> None:
        """Forget the callback of ``key`` (its task ended)."""
        with self._lock:
            self._calls.pop(key, None)

    def teardown(self) -> None:
        """The worker closes: call every callback (a failing one is logged, the rest run)."""
        with self._lock:
            self.closing = True
            calls = list(self._calls.values())
            self._calls.clear()
        for fn in calls:
            try:
                fn()
            except Exception:  # one task's callback must not keep the worker open
                logger.exception("labkit: a task's call at its worker's close failed")


def on_close(fn: Callable[[], None]) -> Callable[[], None]:
    """Call ``fn()`` when the worker running this task begins to close; returns what forgets it.

    Outside a worker's task nothing is registered (nothing closes under it).
    """
    from distributed import get_worker

    try:
        worker = get_worker()
    except ValueError:
        return lambda: None
    watch = _watch(worker)
    key = None if watch is None else watch.add(fn)
    if watch is None or key is None or not _running(worker):
        fn()  # closing already (its plugins may be torn down): the task ends now
        return lambda: None
    return functools.partial(watch.remove, key)


@functools.cache
def _plugin_class() -> type:
    """Dask's ``WorkerPlugin`` holding a :class:`CloseWatch` (made on first use: Dask is
    imported only where tasks run)."""
    from distributed.diagnostics.plugin import WorkerPlugin

    class ClosePlugin(WorkerPlugin):
        """Calls its watch when the worker tears its plugins down (as it begins to close)."""

        def __init__(self, watch: CloseWatch):
            self.watch = watch

        def teardown(self, worker) -> None:
            self.watch.teardown()

    return ClosePlugin


def _watch(worker) -> CloseWatch | None:
    """The worker's :class:`CloseWatch`, installed on its event loop by the first caller."""
    from distributed.utils import sync

    with _installing:
        watch = getattr(worker.plugins.get(PLUGIN), "watch", None)
        if isinstance(watch, CloseWatch):
            return watch
        watch = CloseWatch()
        plugin = _plugin_class()(watch)
        try:
            sync(worker.loop, worker.plugin_add, plugin, PLUGIN, callback_timeout=INSTALL_WAIT)
        except Exception:  # a worker closing meanwhile: the caller ends its task now
            logger.debug("labkit: could not watch worker %s for its close", worker.address)
            return None
        return watch


def _running(worker) -> bool:
    """Whether ``worker`` is not (yet) closing: one that closes has torn its plugins down."""
    from distributed.core import Status

    return worker.status not in (Status.closing, Status.closed, Status.failed)


#: What a worker's thread knows of the task it runs (``distributed.worker.thread_state``).
TASK_STATE = ("execution_state", "key", "start_time")


def as_in_this_task(fn: Callable[[], None]) -> Callable[[], None]:
    """``fn`` to run on another thread as if on this task's: the same context variables
    (``get_worker()``, ``get_client()``) and the same task state."""
    from distributed.worker import thread_state

    context = contextvars.copy_context()
    state = {
        name: getattr(thread_state, name) for name in TASK_STATE if hasattr(thread_state, name)
    }

    def run() -> None:
        for name, value in state.items():
            setattr(thread_state, name, value)
        context.run(fn)

    return run
