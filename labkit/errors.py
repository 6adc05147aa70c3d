"""Exception types: every labkit error says where it happened.

A location is a small mapping with any of ``node`` (index), ``node_name``,
``phase``, ``chunk``, ``task``, ``worker`` and ``device``.  Layers that know
more of the location add it with :meth:`LabkitError.locate` as the error
travels outwards, so an error raised inside a node on a Dask worker reaches
the notebook naming node, phase, chunk and worker.

Examples
--------
>>> err = InputError("expected 3 columns, got 4").locate(node=1, node_name="PCA", chunk=7)
>>> str(err)
"expected 3 columns, got 4 [node 1 'PCA', chunk 7]"
"""

from __future__ import annotations

import traceback

__all__ = [
    "LabkitError",
    "TaskError",
    "NotForkableError",
    "InputError",
    "TrainingError",
    "CancelledError",
    "SchedulerError",
    "WorkerLostError",
    "format_location",
    "located",
]

_ORDER = ("node", "node_name", "phase", "chunk", "task", "worker", "device", "replica")


def format_location(where: dict) -> str:
    """Render a location mapping as ``node 1 'PCA', phase 0, chunk 3``."""
    parts = []
    for key in _ORDER:
        if key not in where or key == "node_name":
            continue
        if key == "node" and "node_name" in where:
            parts.append(f"node {where['node']} {where['node_name']!r}")
        else:
            parts.append(f"{key} {where[key]}")
    if "node_name" in where and "node" not in where:
        parts.insert(0, f"node {where['node_name']!r}")
    parts.extend(f"{k} {v}" for k, v in where.items() if k not in _ORDER)
    return ", ".join(parts)


class LabkitError(Exception):
    """Base of every labkit error; carries where it happened.

    Parameters
    ----------
    message : str
        What went wrong, without the location.
    **where
        Location keys (``node``, ``node_name``, ``phase``, ``chunk``, ...);
        ``None`` values are dropped.
    """

    def __init__(self, message: str = "", **where):
        super().__init__(message)
        self.message = message
        self.where = {k: v for k, v in where.items() if v is not None}
        self.remote_traceback: str | None = None

    def locate(self, **where) -> "LabkitError":
        """Add location keys that are not known yet; return ``self``."""
        for key, value in where.items():
            if value is not None and key not in self.where:
                self.where[key] = value
        return self

    def __str__(self) -> str:
        loc = format_location(self.where)
        return f"{self.message} [{loc}]" if loc else self.message

    def __reduce__(self):
        return (_rebuild, (type(self), self.message, self.where, self._extra()))

    def _extra(self) -> dict:
        return {"remote_traceback": self.remote_traceback}


def _rebuild(cls, message, where, extra):
    err = cls.__new__(cls)
    LabkitError.__init__(err, message, **where)
    for key, value in extra.items():
        setattr(err, key, value)
    return err


class TaskError(LabkitError):
    """A task raised a non-labkit exception; the original is described, not kept.

    The original exception object may not be picklable or importable in the
    caller, so its type name, message and the remote traceback travel as text.

    Attributes
    ----------
    original_type : str
        Qualified name of the exception raised inside the task.
    original_message : str
        ``str()`` of that exception.
    remote_traceback : str
        The traceback formatted where the task ran.
    """

    def __init__(self, message="", original_type="", original_message="",
                 remote_traceback=None, **where):
        super().__init__(message, **where)
        self.original_type = original_type
        self.original_message = original_message
        self.remote_traceback = remote_traceback

    @classmethod
    def from_exception(cls, exc: BaseException, traceback_text: str, what: str = "task",
                       **where) -> "TaskError":
        """Describe ``exc`` as a TaskError: ``<what> failed with <type>: <message>``."""
        kind = type(exc)
        name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
        return cls(f"{what} failed with {name}: {exc}", original_type=name,
                   original_message=str(exc), remote_traceback=traceback_text, **where)

    def _extra(self) -> dict:
        return {"remote_traceback": self.remote_traceback, "original_type": self.original_type,
                "original_message": self.original_message}


def located(exc: BaseException, what: str = "task", kind: type | None = None,
            **where) -> LabkitError:
    """``exc`` as a labkit error located at ``where``, for re-raising in the caller.

    A labkit error keeps its message and gains the location keys it lacks; any
    other exception becomes a ``kind`` (a :class:`TaskError` by default) that
    keeps its type, message and traceback: ``<what> failed with <type>: ...``.

    Examples
    --------
    >>> str(located(ValueError("bad row"), "replica 1", replica=1))
    'replica 1 failed with ValueError: bad row [replica 1]'
    """
    if isinstance(exc, LabkitError):
        return exc.locate(**where)
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return (kind or TaskError).from_exception(exc, text, what=what, **where)


class NotForkableError(LabkitError):
    """A node cannot fork; a parallel flow trains it locally instead."""


class InputError(LabkitError, ValueError):
    """Bad input: wrong shape, dtype, non-finite values, empty or wrong iterables."""


class TrainingError(LabkitError, RuntimeError):
    """A call that does not fit the training state (execute before training, ...)."""


class CancelledError(LabkitError):
    """A run was cancelled before it finished."""


class SchedulerError(LabkitError, RuntimeError):
    """A scheduler was misused (shut down, no task callable) or lost its cluster."""


class WorkerLostError(SchedulerError):
    """A worker died under a task (or with its inputs) more often than a task may survive."""
