"""Keep Dask workers from logging the failures of labkit's own tasks.

A failing task reaches its caller as a located labkit error (see
:mod:`labkit.scheduling.task`); the worker's "Compute Failed" block for the same
failure, printed in red in a notebook by every worker a task failed on, says it
again without the location.  :func:`install` adds a filter to the worker's
logger that drops those records for labkit's keys (``labkit-...``) only: other
code's tasks on a shared cluster are logged as before.

Examples
--------
>>> import logging
>>> install()
>>> any(isinstance(f, LabkitTaskFailures) for f in logging.getLogger("distributed.worker").filters)
True
"""

from __future__ import annotations

import logging

__all__ = ["LabkitTaskFailures", "install"]

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


def install() -> None:
    """Add the filter to ``distributed.worker``'s logger in this process, once."""
    worker_log = logging.getLogger("distributed.worker")
    if not any(isinstance(f, LabkitTaskFailures) for f in worker_log.filters):
        worker_log.addFilter(LabkitTaskFailures())
