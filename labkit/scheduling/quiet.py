"""Keep Dask workers from logging the failures of labkit's own tasks.

A failing task reaches its caller as a located labkit error (see
:mod:`labkit.scheduling.task`); the worker's "Compute Failed" block for the same
failure, printed in red in a notebook by every worker a task failed on, says it
again without the location.  So does a worker closed under a running task (a
scheduler shut down mid-run): its "Async instruction for <Task cancelled
name="execute('labkit-...')"> ended with CancelledError" warning repeats what
the run's owner is told, a ``SchedulerError`` saying the scheduler was shut
down.  :func:`install` adds filters to the workers' loggers that drop those
records for labkit's keys (``labkit-...``) only: other code's tasks on a shared
cluster are logged as before.

Examples
--------
>>> import logging
>>> install()
>>> any(isinstance(f, LabkitTaskFailures) for f in logging.getLogger("distributed.worker").filters)
True
"""

from __future__ import annotations

import logging

__all__ = ["LabkitTaskFailures", "LabkitTasksClosed", "install"]

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


def install() -> None:
    """Add the filters to the workers' loggers in this process, once."""
    for name, kind in (
        ("distributed.worker", LabkitTaskFailures),
        ("distributed.worker.state_machine", LabkitTasksClosed),
    ):
        log = logging.getLogger(name)
        if not any(isinstance(f, kind) for f in log.filters):
            log.addFilter(kind())
