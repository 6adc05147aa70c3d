"""The in-process, serial scheduler: same API, no cluster."""

from __future__ import annotations

from ...errors import LabkitError
from ...events import TaskStarted
from ..dask.dask_adapter import is_delayed, is_future
from ..workers.running import run_task
from .base import Scheduler, as_labkit_error

__all__ = ["LocalScheduler", "resolve_local"]


def resolve_local(data):
    """Materialise a Dask future or delayed chunk in-process; other data as is."""
    if is_delayed(data):
        return data.compute(scheduler="sync")
    if is_future(data):
        return data.result()
    return data


class LocalScheduler(Scheduler):
    """Runs each task at once, in the calling thread.

    Useful for debugging and as the serial reference: results, events and
    errors are the same as on :class:`DaskScheduler`.

    Examples
    --------
    >>> s = LocalScheduler()
    >>> s.add_task(2, lambda x: x + 1)  # returns the task id
    0
    >>> s.get_results()
    [3]
    """

    def start_task(self, entry, data):
        """Run the task now, in the calling thread; its outcome goes the one way (``record``)."""
        info = entry.info
        self.emit(TaskStarted(info, "local"))
        try:
            outcome = run_task(entry.callable, resolve_local(data), info, worker="local")
        except LabkitError as err:
            self.record(entry, error=err)
        except Exception as exc:  # resolving a future/delayed can fail too
            self.record(entry, error=as_labkit_error(exc, info, "local"))
        else:
            self.record(entry, outcome)
        return None
