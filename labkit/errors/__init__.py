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
in tracebacks and pickles too.

Examples
--------
>>> err = InputError("expected 3 columns, got 4").locate(node=1, node_name="PCA", chunk=7)
>>> str(err)
"expected 3 columns, got 4 [node 1 'PCA', chunk 7]"
"""

from __future__ import annotations

from .frames import SHOW_INTERNAL_FRAMES, RemoteTraceback, user_frames
from .kinds import (
    CancelledError,
    InputError,
    LabkitError,
    NotFittedError,
    NotForkableError,
    SchedulerError,
    StorageError,
    TaskError,
    TrainingError,
    WorkerLostError,
    exception_text,
    format_location,
)
from .wrapping import USER_EXITS, for_caller, located, pulled, require_callable

__all__ = [
    "LabkitError",
    "TaskError",
    "NotForkableError",
    "InputError",
    "TrainingError",
    "NotFittedError",
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
    NotFittedError,
    CancelledError,
    SchedulerError,
    WorkerLostError,
    StorageError,
    RemoteTraceback,
):
    _kind.__module__ = __name__
del _kind
