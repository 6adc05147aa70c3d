"""Keep Dask workers from logging the failures of labkit's own tasks.

A failing task reaches its caller as a located labkit error (see
:mod:`labkit.scheduling.workers.running`); the worker's "Compute Failed" block for the same
failure, printed in red in a notebook by every worker a task failed on, says it
again without the location.  So does a worker closed under a running task (a
scheduler shut down mid-run): its "Async instruction for <Task cancelled
name="execute('labkit-...')"> ended with CancelledError" warning repeats what
the run's owner is told, a ``SchedulerError`` saying the scheduler was shut
down.  :func:`install` adds filters to the workers' loggers that drop those
records for labkit's keys (``labkit-...``) only: other code's tasks on a shared
cluster are logged as before.

Dask's chatter below WARNING (a scheduler's "Remove client", a nanny's "Closing
Nanny") is dropped while labkit has an embedded cluster open:
:func:`quiet_clusters` holds a filter on the handlers of Dask's loggers from
before a cluster starts until after it closed.  Dask's own quieting
(``silence_logs``) sets those handlers' levels and puts back what it found when
its cluster closes: with two clusters, closing the first put back "INFO" under
the second, whose closing lines then reached the notebook.  A filter counted
by labkit does not depend on that order.  Warnings and errors pass.

Examples
--------
>>> import logging
>>> install()
>>> any(isinstance(f, LabkitTaskFailures) for f in logging.getLogger("distributed.worker").filters)
True
"""

from __future__ import annotations

import contextlib
import logging
import threading

from ..tasks.pickling import cause_chain

__all__ = [
    "LabkitTaskFailures",
    "LabkitTasksClosed",
    "LabkitObjectsUnpicklable",
    "install",
    "BelowWarning",
    "quiet_clusters",
]

#: The prefix of every key labkit gives its Dask tasks.
KEY_PREFIX = "labkit-"


class LabkitTaskFailures(logging.Filter):
    """Drops a worker's "Compute Failed" record when the key is one of labkit's."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.msg if isinstance(record.msg, str) else ""
        if not message.startswith("Compute Failed") or not record.args:
            return True
        key = record.args[0] if isinstance(record.args, tuple) else None
        return not str(key).startswith(KEY_PREFIX)


class LabkitTasksClosed(logging.Filter):
    """Drops a closing worker's "ended with CancelledError" record for labkit's tasks."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage() if isinstance(record.msg, str) else ""
        return not (
            message.startswith("Async instruction for")
            and message.endswith("ended with CancelledError")
            and f"execute('{KEY_PREFIX}" in message
        )


class LabkitObjectsUnpicklable(logging.Filter):
    """Drops Dask's "Failed to serialize" record (and traceback) for labkit's own objects:
    labkit raises an ``InputError`` naming the user's part at fault instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg == "Failed to serialize %s." and isinstance(record.args, tuple):
            return not type(record.args[0]).__module__.startswith("labkit.")
        if record.exc_info and record.exc_info[1] is not None:  # "Failed to Serialize"
            return not any(
                isinstance(arg, str) and arg.startswith("<labkit.")
                for err in cause_chain(record.exc_info[1])
                for arg in err.args
            )
        return True


def install() -> None:
    """Add the filters to the workers' loggers in this process, once."""
    for name, kind in (
        ("distributed.worker", LabkitTaskFailures),
        ("distributed.worker.state_machine", LabkitTasksClosed),
    ):
        log = logging.getLogger(name)
        if not any(isinstance(f, kind) for f in log.filters):
            log.addFilter(kind())
    # Dask logs a failure to serialize from several modules (pickle, core, comm): on the
    # handlers that print them, not on each logger
    for handler in logging.getLogger("distributed").handlers:
        if not any(isinstance(f, LabkitObjectsUnpicklable) for f in handler.filters):
            handler.addFilter(LabkitObjectsUnpicklable())


#: Loggers whose handlers print Dask's messages (Dask's logging config gives them their own).
DASK_LOGGERS = ("distributed", "bokeh", "tornado")


class BelowWarning(logging.Filter):
    """Drops Dask's records below WARNING (others' records pass, whatever their level)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING:
            return True
        name = record.name
        return not any(name == root or name.startswith(root + ".") for root in DASK_LOGGERS)


_quiet_lock = threading.Lock()
_quiet_holders = 0
_QUIET = BelowWarning()


def _quiet_handlers() -> list:
    """The handlers Dask's loggers print through here (their own, and the root's)."""
    handlers = []
    for name in DASK_LOGGERS + ("",):
        handlers.extend(logging.getLogger(name).handlers)
    return handlers


@contextlib.contextmanager
def quiet_clusters():
    """Keep Dask's messages below WARNING from printing while the block runs.

    Held once per embedded cluster, from before it starts until after it closed;
    the filter goes when the last holder leaves (whatever the order they leave in).
    """
    global _quiet_holders
    with _quiet_lock:
        _quiet_holders += 1
        for handler in _quiet_handlers():  # a handler added since the first holder, too
            if _QUIET not in handler.filters:
                handler.addFilter(_QUIET)
    try:
        yield
    finally:
        with _quiet_lock:
            _quiet_holders -= 1
            if _quiet_holders == 0:
                for handler in _quiet_handlers():
                    handler.removeFilter(_QUIET)
