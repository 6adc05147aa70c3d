"""Exception types: every labkit error says where it happened.

A location is a small mapping with any of ``node`` (index), ``node_name``,
``phase``, ``chunk``, ``task``, ``worker`` and ``device``.  Layers that know
more of the location add it with :meth:`LabkitError.locate` as the error
travels outwards, so an error raised inside a node on a Dask worker reaches
the notebook naming node, phase, chunk and worker.

The room, on the ground floor (it imports nothing else of labkit):

- :mod:`labkit.errors.kinds`: the error classes and how a location reads;
- :mod:`labkit.errors.frames`: a task's traceback cut to the user's frames;
- :mod:`labkit.errors.wrapping`: errors located as they cross threads and
  processes (:func:`located`, :func:`pulled`) and handed to the caller
  (:func:`for_caller`).

Every name is imported from here, ``labkit.errors.X``; the classes say so
in tracebacks and pickles too.  :class:`NotFittedError` subclasses scikit-learn's, so
it is made on first use (:func:`not_fitted_kind`; labkit raises it with
:func:`not_fitted`): ``import labkit`` does not import scikit-learn.

Examples
--------
>>> err = InputError("expected 3 columns, got 4").locate(node=1, node_name="PCA", chunk=7)
>>> str(err)
"expected 3 columns, got 4 [node 1 'PCA', chunk 7]"
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .frames import SHOW_INTERNAL_FRAMES, RemoteTraceback, user_frames
from .kinds import (
    CancelledError,
    InputError,
    LabkitError,
    NotForkableError,
    SchedulerError,
    StorageError,
    TaskError,
    TrainingError,
    WorkerLostError,
    exception_text,
    format_location,
    not_fitted,
    not_fitted_kind,
)
from .wrapping import USER_EXITS, for_caller, located, pulled, require_callable

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
    "RemoteTraceback",
    "format_location",
    "exception_text",
    "located",
    "for_caller",
    "user_frames",
    "pulled",
    "require_callable",
    "USER_EXITS",
    "SHOW_INTERNAL_FRAMES",
]

# The classes are labkit.errors.X wherever they are defined: so a traceback names them,
# and so a pickle finds them again.
for _kind in (
    LabkitError,
    TaskError,
    NotForkableError,
    InputError,
    TrainingError,
    CancelledError,
    SchedulerError,
    WorkerLostError,
    StorageError,
    RemoteTraceback,
):
    _kind.__module__ = __name__
del _kind

if TYPE_CHECKING:
    from .kinds import NotFittedError


def __getattr__(name: str) -> Any:
    """``NotFittedError`` imports scikit-learn: it is made on first use, so ``import labkit``
    stays light (see :func:`labkit.errors.kinds.not_fitted_kind`)."""
    if name == "NotFittedError":
        return not_fitted_kind()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), "NotFittedError"])
