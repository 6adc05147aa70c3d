"""The error classes: every labkit error says where it happened.

A location is a small mapping with any of ``node`` (index), ``node_name``,
``phase``, ``chunk``, ``task``, ``worker`` and ``device``.  Layers that know
more of the location add it with :meth:`LabkitError.locate` as the error
travels outwards.  Every class pickles with its location and its extras, so
it crosses from a worker to the caller whole.
"""

from __future__ import annotations

import errno as codes
import threading
from typing import TYPE_CHECKING, Any, cast

from .frames import user_frames

__all__ = [
    "LabkitError",
    "TaskError",
    "NotForkableError",
    "InputError",
    "TrainingError",
    "NotFittedError",
    "not_fitted",
    "not_fitted_kind",
    "CancelledError",
    "SchedulerError",
    "WorkerLostError",
    "StorageError",
    "format_location",
    "exception_text",
]

_ORDER = (
    "node",
    "node_name",
    "phase",
    "chunk",
    "epoch",
    "batch",
    "step",
    "task",
    "worker",
    "device",
    "replica",
)


def exception_text(exc: BaseException) -> str:
    """``str(exc)``, or its repr, or its type's name: words for an error whose ``__str__`` raises.

    >>> class Odd(Exception):
    ...     def __str__(self):
    ...         raise RuntimeError("no words")
    >>> exception_text(Odd(1))
    'Odd(1)'
    """
    try:
        return str(exc)
    except Exception:  # a user's exception whose __str__ raises: still name it
        pass
    try:
        return repr(exc)
    except Exception:
        return f"<{type(exc).__name__} whose str() and repr() failed>"


def format_location(where: dict[str, Any]) -> str:
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

    def __init__(self, message: str = "", **where: Any):
        super().__init__(message)
        self.message = message
        self.where = {k: v for k, v in where.items() if v is not None}
        self.remote_traceback: str | None = None

    def locate(self, **where: Any) -> LabkitError:
        """Add location keys that are not known yet; return ``self``."""
        for key, value in where.items():
            if value is not None and key not in self.where:
                self.where[key] = value
        return self

    def __str__(self) -> str:
        loc = format_location(self.where)
        return f"{self.message} [{loc}]" if loc else self.message

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.message, self.where, self._extra()))

    def _extra(self) -> dict[str, Any]:
        """What pickling keeps beside the message and the location."""
        return {"remote_traceback": self.remote_traceback}


def _rebuild(
    cls: type[LabkitError], message: str, where: dict[str, Any], extra: dict[str, Any]
) -> LabkitError:
    """A pickled labkit error made again, its location and extras restored."""
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
    user_traceback : str
        The same from the first frame of the user's own code on (see
        :func:`user_frames`); empty when the error came from labkit's code.
    """

    def __init__(
        self,
        message: str = "",
        original_type: str = "",
        original_message: str = "",
        remote_traceback: str | None = None,
        user_traceback: str = "",
        **where: Any,
    ):
        super().__init__(message, **where)
        self.original_type = original_type
        self.original_message = original_message
        self.remote_traceback = remote_traceback
        self.user_traceback = user_traceback

    @classmethod
    def from_exception(
        cls, exc: BaseException, traceback_text: str | None, what: str = "task", **where: Any
    ) -> TaskError:
        """Describe ``exc`` as a TaskError: ``<what> failed with <type>: <message>``."""
        kind = type(exc)
        name = (
            kind.__qualname__
            if kind.__module__ == "builtins"
            else f"{kind.__module__}.{kind.__qualname__}"
        )
        return cls(
            f"{what} failed with {name}: {exception_text(exc)}",
            original_type=name,
            original_message=exception_text(exc),
            remote_traceback=traceback_text,
            user_traceback=user_frames(exc),
            **where,
        )

    def _extra(self) -> dict[str, Any]:
        return {
            "remote_traceback": self.remote_traceback,
            "original_type": self.original_type,
            "original_message": self.original_message,
            "user_traceback": self.user_traceback,
        }


class NotForkableError(LabkitError):
    """A node cannot fork; a parallel flow trains it locally instead."""


class InputError(LabkitError, ValueError):
    """Bad input: wrong shape, dtype, non-finite values, empty or wrong iterables."""


class TrainingError(LabkitError, RuntimeError):
    """A call that does not fit the training state (execute before training, ...)."""


_NOT_FITTED_DOC = """Used before it was fitted or trained: an estimator's predict, a node's execute.

    Both a labkit error (a :class:`TrainingError`) and scikit-learn's
    ``NotFittedError``, so ``except`` of either catches it.
    """

if TYPE_CHECKING:  # what mypy reads; at run time the class is made on first use (below)
    from sklearn.exceptions import NotFittedError as _SklearnNotFitted

    class NotFittedError(TrainingError, _SklearnNotFitted):
        """Used before it was fitted or trained (made at run time by :func:`not_fitted_kind`)."""


class _NotFittedBase(ValueError, AttributeError):
    """scikit-learn's ``NotFittedError`` bases, where scikit-learn is not installed."""


# The class's base is scikit-learn's NotFittedError, and importing scikit-learn (and scipy)
# takes about a second: more than the rest of labkit.  So the class is made on first use
# (``labkit.errors.NotFittedError``, raising it, unpickling it), never by ``import labkit``,
# which every new Dask worker pays before it runs a trial.  Made once, under a lock: two
# classes would break ``except`` and pickling.
_made: list[type] = []
_making = threading.Lock()


def not_fitted_kind() -> type[NotFittedError]:
    """The class ``NotFittedError``, made on the first call (it imports scikit-learn)."""
    with _making:
        if not _made:
            _made.append(_make_not_fitted())
        return cast("type[NotFittedError]", _made[0])


def _make_not_fitted() -> type:
    """``NotFittedError(TrainingError, sklearn.exceptions.NotFittedError)``, as labkit.errors."""
    try:  # scikit-learn is optional: without it, the same bases as its error
        from sklearn.exceptions import NotFittedError as base
    except ImportError:  # pragma: no cover - scikit-learn is installed for the tests
        base = _NotFittedBase
    # labkit.errors.NotFittedError in tracebacks, and where a pickle finds it again
    names = {
        "__doc__": _NOT_FITTED_DOC,
        "__module__": "labkit.errors",
        "__qualname__": "NotFittedError",
    }
    return type("NotFittedError", (TrainingError, base), names)


def not_fitted(message: str = "", **where: Any) -> NotFittedError:
    """A :class:`NotFittedError` to raise, without importing scikit-learn before it is needed."""
    return not_fitted_kind()(message, **where)


def __getattr__(name: str) -> Any:
    """``NotFittedError`` is made on first use (see :func:`not_fitted_kind`)."""
    if name == "NotFittedError":
        return not_fitted_kind()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class CancelledError(LabkitError):
    """A run was cancelled before it finished."""


class SchedulerError(LabkitError, RuntimeError):
    """A scheduler was misused (shut down, no task callable) or lost its cluster."""


class WorkerLostError(SchedulerError):
    """A worker died under a task (or with its inputs) more often than a task may survive."""


class StorageError(LabkitError, OSError):
    """A file labkit writes or reads failed (disk full, no permission, a removed folder).

    Names the path (and, where it is known, the node or trial); also an
    ``OSError``, whose ``errno`` it keeps, so ``except OSError`` still works.
    """

    def __init__(self, message: str = "", errno: int | None = None, **where: Any):
        super().__init__(message, **where)
        self.errno = errno

    @classmethod
    def of(cls, exc: OSError, doing: str, path: str, **where: Any) -> StorageError:
        """The error for ``exc``, raised while ``doing`` (e.g. "saving the flow") at ``path``."""
        name = codes.errorcode.get(exc.errno or 0, "")
        reason = exc.strerror or str(exc)
        return cls(
            f"{doing} failed: {reason}" + (f" ({name})" if name else ""),
            errno=exc.errno,
            path=path,
            **where,
        )

    def _extra(self) -> dict[str, Any]:
        return dict(super()._extra(), errno=self.errno)
