"""Shared inputs: sent to the workers once, and a cache folder that is always removed.

:class:`Inputs` is what tasks read ``X`` and ``y`` from.  It travels inside
the layer's task callable, which a scheduler ships once (Dask broadcasts it to
every worker), never with each task:

* ``"memory"``: the arrays themselves; on Dask one broadcast sends them to each
  worker once.
* ``"memmap"``: the arrays written once to ``.npy`` files in a private cache
  folder; tasks map them read-only (workers on one machine share the page
  cache, nothing is copied).  A sparse ``X`` (CSR) is written as its three
  arrays and rebuilt around their maps.  :func:`open_inputs` removes the
  folder when the work ends, whatever way it ends; a folder that cannot be
  removed is a warning naming its path.

Examples
--------
>>> import numpy as np
>>> with open_inputs(np.ones((4, 2)), np.arange(4), mode="memmap") as inputs:
...     folder = inputs.folder
...     float(inputs.X.sum()), inputs.y.tolist()
(8.0, [0, 1, 2, 3])
>>> import os; os.path.exists(folder)
False
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import warnings

import numpy as np
import scipy.sparse as sp

from ..constraints import Options, check_argument
from ..errors import InputError
from ..scheduling import LocalScheduler, Scheduler
from ..scheduling.dask.connect import on_loopback, scheduler_identity

__all__ = ["Inputs", "open_inputs", "choose_mode", "as_scheduler"]

#: What ``cache`` may be.
CACHE_RULE = [Options(("auto", "memory", "memmap"))]

_MAPPED: dict[str, np.ndarray] = {}  # per process: path -> read-only memory map
_MAPPED_LOCK = threading.Lock()  # in-process workers map while the client forgets


class Inputs:
    """``X`` and ``y`` for tasks, held in memory or as paths to memory-mapped files."""

    def __init__(self, X, y, folder: str | None = None):
        self.folder = folder
        if folder is None:
            self._X, self._y, self._paths = X, y, None
        else:
            self._X = self._y = None
            self._paths = (_save(folder, "X", X), None if y is None else _save(folder, "y", y))

    @property
    def X(self):
        return self._X if self._paths is None else _load(self._paths[0])

    @property
    def y(self):
        if self._paths is None:
            return self._y
        return None if self._paths[1] is None else _load(self._paths[1])

    def __getstate__(self):
        return dict(self.__dict__)  # maps are never pickled: only their paths travel


def _save(folder: str, name: str, a):
    """Write ``a`` into ``folder``; its path, or for a sparse matrix ``(shape, paths)``."""
    if sp.issparse(a):
        a = sp.csr_matrix(a)
        return a.shape, tuple(
            _save(folder, f"{name}.{part}", getattr(a, part))
            for part in ("data", "indices", "indptr")
        )
    path = os.path.join(folder, f"{name}.npy")
    np.save(path, np.asarray(a), allow_pickle=False)
    return path


def _load(saved):
    """What :func:`_save` wrote, memory-mapped (a CSR matrix around mapped arrays)."""
    if isinstance(saved, str):
        return _mapped(saved)
    shape, paths = saved
    return sp.csr_matrix(tuple(_mapped(p) for p in paths), shape=shape, copy=False)


def _mapped(path: str) -> np.ndarray:
    """The memory map of ``path``, opened once per process."""
    with _MAPPED_LOCK:
        m = _MAPPED.get(path)
        if m is None:
            m = _MAPPED[path] = np.load(path, mmap_mode="r")
        return m


def as_scheduler(scheduler):
    """``scheduler``, checked; a :class:`LocalScheduler` for ``None``."""
    if scheduler is None:
        return LocalScheduler()
    if not isinstance(scheduler, Scheduler):
        hint = (
            f"; for a Dask cluster at an address pass lk.DaskScheduler({scheduler!r})"
            if isinstance(scheduler, str)
            else ""
        )
        raise InputError(
            f"scheduler must be a labkit Scheduler or None, got {type(scheduler).__name__}{hint}",
            argument="scheduler",
        )
    return scheduler


def choose_mode(scheduler, mode: str) -> str:
    """``"memory"`` or ``"memmap"`` for ``mode="auto"``: memmap when Dask workers share this machine."""
    check_argument("cache", mode, CACHE_RULE)
    if mode != "auto":
        return mode
    client = getattr(scheduler, "client", None)
    if client is None or getattr(scheduler, "in_process", False):
        return "memory"  # in-process: tasks read the arrays by reference
    return "memmap" if on_loopback(scheduler_identity(client)["workers"]) else "memory"


@contextlib.contextmanager
def open_inputs(X, y, mode: str = "memory", cache_dir: str | None = None, client=None):
    """``Inputs`` for the duration of a ``with``; a memmap folder is removed at its end.

    With a Dask ``client``, the workers close their maps of the folder first
    (an open map would keep the deleted files' space in use).
    """
    if mode == "memory":
        yield Inputs(X, y)
        return
    folder = tempfile.mkdtemp(prefix="labkit-ensemble-", dir=cache_dir)
    try:
        yield Inputs(X, y, folder)
    finally:
        if client is not None:
            with contextlib.suppress(Exception):  # a closed client has no workers holding maps
                client.run(forget, folder, on_error="ignore")
        forget(folder)
        _remove(folder)


def forget(folder: str) -> int:
    """Drop this process's maps of files in ``folder``; how many there were.

    Maps of files already deleted go too: a task cancelled by another run may
    have mapped its folder after that folder's own ``forget``.
    """
    with _MAPPED_LOCK:
        paths = [p for p in _MAPPED if p.startswith(folder + os.sep) or not os.path.exists(p)]
        for path in paths:
            del _MAPPED[path]
    return len(paths)


def _remove(folder: str) -> None:
    """Delete ``folder``; a failure is a warning naming it."""

    def failed(function, path, exc_info):
        raise exc_info[1]

    try:
        shutil.rmtree(folder, onerror=failed)
    except OSError as exc:
        warnings.warn(
            f"labkit could not remove the ensemble cache {folder}: {exc}",
            RuntimeWarning,
            stacklevel=3,
        )
