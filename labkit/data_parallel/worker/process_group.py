"""Process groups of their own: any number per worker process, one per replica group.

``torch.distributed.init_process_group`` makes *the* default group of a
process, so a worker could serve one trainer only: a second trainer on the
same cluster failed with "this worker already holds a process group".  Each
replica group here meets through its own store (under a prefix of its own)
and builds its own backend object (``ProcessGroupGloo``, or
``ProcessGroupNCCL`` on GPUs), which nothing else in the process shares;
collectives go through that object.  Closing one group leaves the others, and
the default group (a user's own), as they were.

Examples
--------
A group of one, through a file store:

>>> import os, shutil, tempfile, torch
>>> folder = tempfile.mkdtemp()
>>> group = open_group("file://" + os.path.join(folder, "store"), 0, 1, "gloo", 10.0, "doc")
>>> t = torch.ones(3)
>>> group.all_reduce(t)
>>> t.tolist()
[1.0, 1.0, 1.0]
>>> group.close(); shutil.rmtree(folder)
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

__all__ = ["ProcessGroup", "open_group", "open_group_unless", "CALL_OFF_EVERY"]

#: Seconds between two looks, while a rank waits for its peers, at whether its forming was
#: called off.
CALL_OFF_EVERY = 0.1


class ProcessGroup:
    """One replica group's backend on this rank: ``all_reduce`` (a sum) and ``close``."""

    def __init__(self, backend, rank: int, world: int, name: str, store=None):
        self.backend, self.rank, self.world, self.name = backend, rank, world, name
        self._store = store  # kept alive as long as the backend that uses it
        self.closed = False

    def all_reduce(self, tensor: torch.Tensor) -> None:
        """Sum ``tensor`` over the ranks, in place."""
        if self.world > 1:
            self.backend.allreduce([tensor]).wait()

    def all_reduce_async(self, tensor: torch.Tensor):
        """Start summing ``tensor`` over the ranks; ``.wait()`` the handle returned."""
        return self.backend.allreduce([tensor])

    def close(self) -> None:
        """Let go of the backend (its sockets close); idempotent."""
        if self.closed:
            return
        self.closed = True
        abort = getattr(self.backend, "abort", None)
        if abort is not None and self.backend.name() == "nccl":
            abort()  # NCCL's communicators are not freed by dropping the object
        self.backend, self._store = None, None


def open_group(
    init_method: str, rank: int, world: int, backend: str, timeout: float, name: str
) -> ProcessGroup:
    """Meet the other ranks at ``init_method`` (``file://`` or ``tcp://``) as group ``name``.

    Every rank calls this with the same ``init_method``, ``world`` and ``name``;
    it returns once all have joined (or raises after ``timeout`` seconds).
    """
    wait = timedelta(seconds=timeout)
    store, rank, world = next(dist.rendezvous(init_method, rank, world, timeout=wait))
    store.set_timeout(wait)
    store = dist.PrefixStore(f"labkit/{name}/", store)
    made: Any  # the backend object: gloo's or NCCL's
    if backend == "gloo":
        made = dist.ProcessGroupGloo(store, rank, world, wait)
    elif backend == "nccl":
        options = dist.ProcessGroupNCCL.Options()
        options._timeout = wait
        made = dist.ProcessGroupNCCL(store, rank, world, options)
    else:
        raise ValueError(f"backend must be 'gloo' or 'nccl', got {backend!r}")
    return ProcessGroup(made, rank, world, name, store)


def open_group_unless(
    called_off: Callable[[], bool], *args, setting=contextlib.nullcontext
) -> ProcessGroup | None:
    """:func:`open_group` (``*args``), given up as soon as ``called_off()`` says so: None then.

    A rank waits in the rendezvous for peers that may never come: one whose
    worker retired or was lost while the group formed.  The client sees that
    loss within a second and calls the forming off (it tears the rank or its
    process group down); the rank then frees its worker's thread at once, rather
    than at the rendezvous' timeout, so that the next forming's task on this
    worker runs.  The wait itself goes on, on a thread of its own, until its
    timeout; a group it makes after all is closed.  ``setting()`` is entered
    around the wait (the backend's interface, :func:`.network.bound`).
    """
    box: dict = {}
    lock, done = threading.Lock(), threading.Event()

    def meet() -> None:
        try:
            with setting():
                box["group"] = open_group(*args)
        except BaseException as exc:
            box["error"] = exc
        with lock:
            done.set()
            left = box.get("left", False)
        if left and "group" in box:
            box["group"].close()  # made after the forming was called off: nobody takes it

    threading.Thread(target=meet, daemon=True, name="labkit-rendezvous").start()
    while not done.wait(CALL_OFF_EVERY):
        if called_off():
            with lock:
                if not done.is_set():
                    box["left"] = True
                    return None
    if "error" in box:
        raise box["error"]
    return box["group"]
