"""One BLAS (and OpenMP) thread while tasks run on threads of this process.

Worker threads of an in-process cluster share the process's BLAS library.
OpenBLAS (and MKL) start one thread per core for every call, so two worker
threads each calling BLAS on two cores run four busy threads, and OpenBLAS's
idle threads spin: measured here, the in-process cluster ran PCA moments at
0.93x serial with BLAS left alone and 1.88x with one BLAS thread.  Worker
processes get one BLAS thread from Dask's nanny; a ``DaskScheduler`` whose
workers are threads holds this limit for its life.  Holders are counted, so
the last one to leave restores the library's threads.  (OpenMP's limit only
reaches the thread that sets it.)

One :class:`threadpoolctl.ThreadpoolController` is made per process and
cached: inspecting the loaded libraries costs milliseconds.

Examples
--------
>>> with one_blas_thread():
...     pass   # BLAS calls here use one thread
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

__all__ = ["one_blas_thread", "blas_controller"]

_lock = threading.Lock()
_active = 0
_saved: list[tuple[Any, int]] = []  # (a threadpoolctl LibController, its threads)
_controller = None


def blas_controller():
    """The process's cached ``ThreadpoolController`` (made on first use)."""
    global _controller
    if _controller is None:
        from threadpoolctl import ThreadpoolController

        _controller = ThreadpoolController()
    return _controller


def _blas_libraries() -> list:
    """BLAS and OpenMP runtimes (scikit-learn's and torch's threads are OpenMP's)."""
    return [lib for lib in blas_controller().lib_controllers if lib.user_api in ("blas", "openmp")]


@contextlib.contextmanager
def one_blas_thread():
    """Limit BLAS (and OpenMP) to one thread while the block runs; holders are counted."""
    global _active
    with _lock:
        if _active == 0:
            _saved[:] = [(lib, lib.num_threads) for lib in _blas_libraries()]
            for lib, threads in _saved:
                if threads != 1:
                    lib.set_num_threads(1)
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0:
                for lib, threads in _saved:
                    if threads != 1:
                        lib.set_num_threads(threads)
                _saved.clear()
