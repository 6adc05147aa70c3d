"""Joining on the workers: one fork per worker thread and phase, not one per chunk.

Each worker thread keeps a fork of the node for the phase and trains every
chunk it gets into it; a task returns only its chunk's number.  The client
takes the forks back when the phase ends (and on the way, to bound what it
keeps, or to show live state), so it receives one fork per worker thread
instead of one per chunk.  That matters when forks are big and cross a
process boundary: a ``QuadraticExpansion`` of 50 inputs into ``SFA`` makes a
fork of 27 MiB.

Exactly once, even when workers die: every fork carries the numbers of the
chunks it absorbed, and the client joins only forks whose chunks no joined
fork has seen.  Chunks that no joined fork covers (their worker died with
its fork, or a task ran twice) are trained again from the data the client
kept for them.  The client keeps a chunk until a joined fork covers it, and
only where a worker can be lost without the client (worker processes or
another host); lazy chunks cost nothing to keep.

Workers that leave: a worker retired (``client.retire_workers``, the end of its
``lifetime``, an adaptive scale-down) takes its forks with it, and their chunks are
trained again after the phase.  So while a phase runs on worker processes whose workers
come and go (they have a ``lifetime``, or one of them left during the phase) the client
takes the forks back every :data:`WorkerJoin.COLLECT_EVERY` seconds (more rarely where
a take costs more: at most :data:`WorkerJoin.COLLECT_SHARE` of the time), and a
departing worker takes at most those seconds of its work with it, not the phase's.

Examples
--------
>>> import numpy as np, labkit as lk
>>> x = np.random.default_rng(0).normal(size=(400, 4))
>>> flow = lk.ParallelFlow([lk.nodes.PCA(output_dim=2)])
>>> flow.train([np.array_split(x, 4)], scheduler=lk.LocalScheduler(), join="workers")
>>> serial = lk.Flow([lk.nodes.PCA(output_dim=2)])
>>> serial.train([np.array_split(x, 4)])
>>> bool(np.allclose(np.abs(flow.execute(x)), np.abs(serial.execute(x))))
True
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from ..errors import CancelledError, SchedulerError
from ..scheduling import TaskCallable, current_task, worker_address
from .callables import FlowTrainCallable, execute_nodes
from .chunks import split_chunk
from .node import Node

__all__ = ["WorkerJoinCallable", "WorkerJoin", "take_forks"]

logger = logging.getLogger("labkit.flows")

JOIN_MODES = ("auto", "client", "workers")


# -- on the workers ---------------------------------------------------------------------


@dataclass
class _Fork:
    """One worker thread's fork for a phase and the chunks trained into it."""

    node: Node
    chunks: list = field(default_factory=list)
    busy: bool = False  # a task is training into it: not taken until it is done
    broken: bool = False  # a chunk failed half-way: never joined
    wanted: bool = False  # a take found it busy: set aside for the next take when its task ends
    used: float = field(default_factory=time.monotonic)  # when a task last ended in it


#: A fork in a worker process unused this long is dropped (its client may be gone).
#: Safe: the client keeps every chunk no joined fork covers and trains it again.
IDLE_FORK_SECONDS = 600.0


_LOCK = threading.Lock()
_HELD: dict[str, dict[str, _Fork]] = {}  # phase key -> worker thread -> its fork
_CLOSED: OrderedDict[str, None] = OrderedDict()  # phases taken for good (recent ones)
_MAX_CLOSED = 1024
_SET_ASIDE = itertools.count()  # names forks set aside for the next take


def _owner() -> str:
    # A fork is not thread-safe: each worker thread has its own.
    return f"{worker_address()}#{threading.get_ident()}"


def _drop_idle(now: float) -> None:
    """Drop forks idle for :data:`IDLE_FORK_SECONDS` in worker processes (under the lock).

    A client that vanished mid-phase (its kernel died) never takes its forks; the next
    worker-join call on this worker frees them.  Forks of in-process workers are never
    dropped: their client cannot vanish without them, and keeps no chunks to retrain.
    """
    for key, forks in list(_HELD.items()):
        for owner, held in list(forks.items()):
            remote = not owner.startswith(("inproc://", "local#"))
            if remote and not held.busy and now - held.used > IDLE_FORK_SECONDS:
                del forks[owner]
        if not forks:
            del _HELD[key]


def _acquire(key: str, template) -> _Fork:
    """This thread's fork for phase ``key``, marked busy; forked from ``template`` if new."""
    with _LOCK:
        _drop_idle(time.monotonic())
        if key in _CLOSED:
            raise CancelledError("the phase this task belongs to is over")
        forks = _HELD.setdefault(key, {})
        held = forks.get(_owner())
        if held is None:
            held = forks[_owner()] = _Fork(template.fork())
        held.busy = True
        return held


def _release(key: str, held: _Fork) -> None:
    with _LOCK:
        held.busy, held.used = False, time.monotonic()
        forks = _HELD.get(key, {})
        if key in _CLOSED:  # taken for good while this task ran: nobody will ask for it
            forks.pop(_owner(), None)
        elif held.wanted and forks.get(_owner()) is held:
            # a take found it busy (a worker thread is rarely idle): it waits, idle, for the
            # next take under a name of its own, and this thread's next chunk forks anew
            held.wanted = False
            del forks[_owner()]
            forks[f"{_owner()}#{next(_SET_ASIDE)}"] = held
        if not forks:
            _HELD.pop(key, None)


def take_forks(key: str, final: bool = False, dask_worker=None) -> list:
    """Hand over this worker's idle forks of phase ``key`` as ``(fork, chunks)`` pairs.

    ``final`` ends the phase here: busy forks are dropped when their task ends,
    and late tasks of the phase are refused.  Runs on each worker through
    :meth:`~labkit.scheduling.Scheduler.run_on_workers`.
    """
    address = dask_worker.address if dask_worker is not None else worker_address()
    mine = f"{address}#"
    taken = []
    with _LOCK:
        _drop_idle(time.monotonic())
        forks = _HELD.get(key, {})
        for owner, held in list(forks.items()):
            if not owner.startswith(mine):
                continue
            if held.busy:
                held.wanted = not final  # set aside for the next take when its task ends
                continue
            del forks[owner]
            if not held.broken and held.chunks:
                taken.append((held.node, list(held.chunks)))
        if not forks:
            _HELD.pop(key, None)
        if final:
            _close(key)
    return taken


def _close(key: str) -> None:
    _CLOSED[key] = None
    while len(_CLOSED) > _MAX_CLOSED:
        _CLOSED.popitem(last=False)


def has_lifetime(dask_worker=None) -> bool:
    """Whether this worker leaves at the end of a ``lifetime`` (run on each worker)."""
    return dask_worker is not None and bool(dask_worker.lifetime)


def held_phases() -> list[str]:
    """Phase keys with forks still held in this process (for tests and leak checks)."""
    with _LOCK:
        return list(_HELD)


class WorkerJoinCallable(TaskCallable):
    """Trains a chunk into this worker thread's fork of the phase; returns the chunk's number.

    Parameters
    ----------
    inner : FlowTrainCallable
        The usual train callable: its prefix, node (the template fork) and ``transform``.
    key : str
        The phase's key, unique to one training of one node's phase.
    """

    def __init__(self, inner: FlowTrainCallable, key: str):
        self.inner, self.key = inner, key

    @property
    def holds_gil(self) -> bool:
        return self.inner.holds_gil

    @holds_gil.setter
    def holds_gil(self, value: bool) -> None:
        raise AttributeError("holds_gil follows the nodes: set it on a node class")

    def parts(self) -> dict:
        """The nodes of the usual train callable (for messages)."""
        return self.inner.parts()

    def setup_environment(self) -> None:
        self.inner.setup_environment()

    def __call__(self, chunk):
        info = current_task()
        if info is None:
            raise SchedulerError("a worker-join task runs only inside a scheduler's task")
        x, args = split_chunk(self.inner.transform(chunk))
        x = execute_nodes(self.inner.prefix, x)
        held = _acquire(self.key, self.inner.node)
        try:
            held.node.train(x, *args)
            held.chunks.append(info.chunk)
        except BaseException:
            held.broken = True
            raise
        finally:
            _release(self.key, held)
        return info.chunk


# -- on the client ----------------------------------------------------------------------


class WorkerJoin:
    """The client's side of a phase joined on the workers.

    Parameters
    ----------
    scheduler : Scheduler
    node : Node
        The node the forks join into.
    key : str
        The phase's key (see :class:`WorkerJoinCallable`).
    keep : bool
        Keep each chunk until a joined fork covers it (workers can be lost).
    on_join : callable, optional
        Called after each join (live views).
    """

    #: Fewest seconds between takes while a phase runs (:meth:`collecting`): a worker that
    #: leaves takes at most about this much of its work with it.
    COLLECT_EVERY = 1.0

    #: Most of the time that takes while a phase runs may cost: the interval grows with the
    #: CPU seconds the last take took here (big forks are taken more rarely).
    COLLECT_SHARE = 0.02

    def __init__(self, scheduler, node, key: str, keep: bool, on_join=None):
        self.scheduler, self.node, self.key, self.keep = scheduler, node, key, keep
        self.on_join = on_join
        self.kept: dict[int, object] = {}
        self.kept_bytes = 0
        self.covered: set[int] = set()
        self.forks_joined = 0
        self._sizes: dict[int, int] = {}
        self._taking = threading.Lock()  # one take at a time: the phase's and the collector's
        self._books = threading.Lock()  # what is kept: added by the phase, freed by a take
        self._took = 0.0  # CPU seconds the last take took on this thread

    def added(self, chunk: int, data, nbytes: int) -> None:
        """Chunk number ``chunk`` was submitted."""
        if self.keep:
            with self._books:
                self.kept[chunk], self._sizes[chunk] = data, nbytes
                self.kept_bytes += nbytes

    def collect(self, final: bool = False) -> int:
        """Join the forks the workers hand over; the number joined."""
        with self._taking:
            start = time.thread_time()  # what a take costs here (forks unpickled and joined),
            taken = self.scheduler.run_on_workers(take_forks, self.key, final)
            joined = 0
            for forks in taken.values():
                for fork, chunks in forks:
                    joined += self._join(fork, set(chunks))
            self._took = time.thread_time() - start  # not the wait for a slow worker's answer
        return joined

    @contextlib.contextmanager
    def collecting(self):
        """Take the forks back now and then while the block runs (where workers can leave
        without the client: see the module's doc); the phase's last take comes after it."""
        if not self.keep:
            yield
            return
        stop = threading.Event()
        thread = threading.Thread(
            target=self._collect_until, args=(stop,), daemon=True, name="labkit-collect"
        )
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()

    def _collect_until(self, stop: threading.Event) -> None:
        """Until ``stop`` is set, take forks back every :data:`COLLECT_EVERY` s or so once the
        workers are seen to come and go (a lifetime, a departure); until then only look."""
        elastic, wait = False, 0.0
        seen: set[str] = set()
        while not stop.wait(wait):
            try:
                if not elastic:
                    elastic, seen = self._elastic(seen)
                if elastic:
                    self.collect()
            except Exception:  # a worker or the scheduler gone meanwhile: the last take says
                logger.debug("labkit: taking forks back during the phase failed", exc_info=True)
            wait = max(self.COLLECT_EVERY, self._took / self.COLLECT_SHARE)

    def _elastic(self, seen: set) -> tuple[bool, set]:
        """Whether workers leave on their own (a lifetime) or one of ``seen`` left; and the
        workers seen so far.  A stable cluster keeps one fork a worker thread and phase."""
        answers = self.scheduler.run_on_workers(has_lifetime)
        return any(answers.values()) or bool(seen - set(answers)), seen | set(answers)

    def _join(self, fork, chunks: set[int]) -> int:
        # A chunk already covered ran twice (its first worker's result was lost after
        # it had been trained): this fork is dropped and its other chunks trained again.
        if chunks & self.covered:
            return 0
        self.node.join(fork)
        self.covered |= chunks
        self.forks_joined += 1
        with self._books:
            for chunk in chunks:
                self.kept.pop(chunk, None)
                self.kept_bytes -= self._sizes.pop(chunk, 0)
        if self.on_join is not None:
            self.on_join()
        return 1

    def missing(self, n_chunks: int) -> list[int]:
        """Chunks of ``0..n_chunks-1`` that no joined fork covers."""
        return sorted(set(range(n_chunks)) - self.covered)

    def data_for(self, chunks: list[int]) -> list:
        """The kept data of ``chunks``; an error when a chunk was not kept."""
        lost = [c for c in chunks if c not in self.kept]
        if lost:
            raise SchedulerError(
                f"chunks {lost} were trained on a worker that was lost, and "
                "the client did not keep them"
            )
        return [self.kept.pop(c) for c in chunks]

    def abandon(self) -> None:
        """End the phase on the workers without joining (after an error)."""
        with contextlib.suppress(Exception):  # the cluster may be gone: nothing left to free
            self.scheduler.run_on_workers(take_forks, self.key, True)
        self.kept.clear()
