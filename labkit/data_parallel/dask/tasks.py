"""The tasks of one replica group on its Dask workers: submitted, awaited, released, located.

:class:`RankTasks` is the group's one way to its workers: :meth:`~RankTasks.submit`
a task to a rank's worker, :meth:`~RankTasks.run` one task per rank and wait for
all (never hanging on a lost worker or a rank that lags its peers), and
:meth:`~RankTasks.call` to release what a call issued and turn Dask's own errors
into labkit's.  A collective that failed leaves the group :attr:`~RankTasks.broken`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator

from ...errors import LabkitError, SchedulerError, TaskError, WorkerLostError, for_caller
from ...scheduling.dask.connect import cancel_futures, scheduler_identity

__all__ = ["RankTasks", "client_error", "running_tasks", "GRACE"]

#: Seconds the client waits beyond the workers' own timeout.
GRACE = 10.0


class RankTasks:
    """Tasks of replica group ``gid`` on the workers ``names`` (rank order), through ``batch``.

    The replicas' tasks go through a batch of the scheduler, so that cancelling
    or shutting down the scheduler reaches them as it reaches every other task.
    """

    def __init__(self, client, gid: str, batch, names: list[str], timeout: float):
        self.client, self.gid, self.batch = client, gid, batch
        self.names = list(names)
        self.timeout = timeout
        #: why the group is broken (a collective failed, a worker was lost), else None
        self.broken: str | None = None
        self._calls = threading.local()  # the futures a call issued (see .call), per thread

    # -- one call ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def call(self, what: str) -> Iterator[None]:
        """One call of the group: what it leaves ends with it, and Dask's errors become labkit's.

        Every future the call issued in this thread (its tasks, the data it
        scattered) is released at its end, whatever happened: a failed call's
        futures live on in its traceback (a notebook keeps the last one), and
        would keep their keys on the scheduler.  An error of Dask itself (a
        future cancelled as its worker died, a closed comm) comes out as a
        :class:`~labkit.errors.WorkerLostError` naming the lost worker, or a
        :class:`~labkit.errors.SchedulerError`.
        """
        __tracebackhide__ = True
        if getattr(self._calls, "issued", None) is not None:  # within a call already
            yield
            return
        issued: list = []
        self._calls.issued = issued
        try:
            yield
        except LabkitError:
            raise
        except Exception as exc:
            err = self.labkit_error(exc, what)
            if err is None:
                raise
            raise for_caller(err) from exc
        finally:
            self._calls.issued = None
            for future in issued:
                future.release()

    def labkit_error(self, exc: BaseException, what: str) -> LabkitError | None:
        """The labkit error of Dask's ``exc`` during a ``what`` (a lost worker, if one is);
        None for an error that is not Dask's own."""
        if isinstance(exc, LabkitError) or not _from_dask(exc):
            return None
        try:
            alive = self.alive()
        except Exception:  # the scheduler is gone too
            alive = set(self.names)
        lost = [(r, n) for r, n in enumerate(self.names) if n not in alive]
        reason = f"{type(exc).__name__}: {exc}"
        if lost:
            rank, name = lost[0]
            self.broken = f"the worker of replica {rank} was lost"
            return WorkerLostError(
                f"the worker of replica {rank} was lost during a {what} ({reason}); the "
                "replica group is broken: close the trainer and start a new one",
                replica=rank,
                worker=name,
            )
        return SchedulerError(f"a {what} failed in Dask: {reason}")

    def _issued(self, future):
        """``future``, released at the end of the call that issued it (see :meth:`call`)."""
        issued = getattr(self._calls, "issued", None)
        if issued is not None:
            issued.append(future)
        return future

    # -- submitting ----------------------------------------------------------------------------

    def submit(self, rank: int, fn: Callable, *args, **kwargs):
        """A future of ``fn(*args, **kwargs)`` on rank ``rank``'s worker, released with the call."""
        # a labkit key: workers do not log these tasks' failures (see scheduling.dask.quiet),
        # the client raises them once, located
        key = f"labkit-replica-{fn.__name__}-{self.gid[:8]}-{rank}-{uuid.uuid4().hex[:8]}"
        return self._issued(
            self.client.submit(
                fn,
                *args,
                workers=[self.names[rank]],
                key=key,
                allow_other_workers=False,
                pure=False,
                **kwargs,
            )
        )

    def each(self, fn: Callable, *args, what: str, ranks=None) -> list:
        """``fn(gid, *args)`` on every rank (or ``ranks``), awaited: the results in rank order."""
        ranks = list(range(len(self.names)) if ranks is None else ranks)
        return self.run([self.submit(r, fn, self.gid, *args) for r in ranks], what, ranks=ranks)

    def ship(self, rank: int, data):
        """A future of ``data`` on rank ``rank``'s worker, released with the call."""
        # with a deadline: a scatter to a worker that is dying may otherwise never return
        shipped = self.client.scatter(
            data,
            workers=[self.names[rank]],
            hash=False,
            direct=True,
            timeout=self.timeout + GRACE,
        )
        for future in shipped if isinstance(shipped, list) else [shipped]:
            self._issued(future)
        return shipped

    def beside(self, fn: Callable, *args, workers: list[str] | None = None) -> dict:
        """``fn(*args)`` beside the task threads of ``workers`` (the group's live ones by
        default): ``client.run``, which never queues behind a loop; errors ignored, and
        workers that did not answer within the group's timeout left out."""
        if workers is None:
            alive = self.alive()
            workers = [n for n in self.names if n in alive]
        # with a deadline: a worker that is dying (still listed, its comm not answering)
        # holds client.run for Dask's connect timeout, or for good when its comm half-closed
        try:
            return self.client.run(
                fn,
                *args,
                on_error="ignore",
                workers=workers,
                callback_timeout=self.timeout + GRACE,
            )
        except (TimeoutError, asyncio.TimeoutError):
            return {}

    def track(self, futures: list) -> None:
        """Let the scheduler's cancel and shutdown reach ``futures``."""
        self.batch.track(futures)

    def settle(self, futures: list) -> None:
        """Nobody waits for ``futures`` any more: untracked, and cancelled where still running."""
        self.batch.untrack(futures)
        pending = [f for f in futures if not f.done()]
        if pending:
            cancel_futures(self.client, pending)

    # -- waiting ---------------------------------------------------------------------------

    def run(self, futures: list, what: str, collective: bool = False, ranks=None) -> list:
        """Results of one task per rank (``ranks``), or the first rank's error; never hangs."""
        __tracebackhide__ = True
        ranks = list(range(len(futures)) if ranks is None else ranks)
        self.track(futures)
        try:
            self._wait(futures, what, collective, ranks)
            return self._results(futures, what, collective, ranks)
        finally:
            self.settle(futures)

    def _wait(self, futures: list, what: str, collective: bool, ranks: list) -> None:
        """Until every future is done; a lost worker, a cancel or a hang raises."""
        __tracebackhide__ = True
        names = [self.names[r] for r in ranks]
        first_done: float | None = None
        while True:
            try:
                _wait_all(futures, timeout=1.0)
                self.check_batch(what, collective)
                return
            except (TimeoutError, asyncio.TimeoutError):  # distinct before Python 3.11
                self.check_batch(what, collective)
            except LabkitError:
                raise
            except Exception as exc:  # Dask's FuturesCancelledError: whose cancel was it?
                self.check_batch(what, collective)
                self._broken_by(collective, f"a {what} was cancelled")
                raise SchedulerError(
                    f"{what} tasks were cancelled outside labkit: {type(exc).__name__}"
                ) from exc
            alive = scheduler_identity(self.client)["workers"]
            stuck = [a for a, f in zip(names, futures, strict=True) if not f.done()]
            self.check_lost(what, collective, ranks, stuck, alive)
            if first_done is None and len(stuck) < len(futures):
                first_done = time.monotonic()
            if first_done is not None and time.monotonic() - first_done > self.timeout + GRACE:
                if not collective and self._running(futures, names):
                    first_done = time.monotonic()  # slow, not hung (see _running)
                    continue
                self._broken_by(collective, f"a {what} did not finish")
                raise SchedulerError(
                    f"{what} did not finish: a worker hangs", device=", ".join(stuck)
                )

    def _running(self, futures: list, names: list) -> bool:
        """Whether every unfinished task of ``futures`` runs on its worker now.

        A rank that lags its peers in a call without collectives holds nobody up:
        a worker that came back after a loss builds its first replica while it
        imports torch, which on a loaded machine took longer than the lag allowed.
        Such a rank is waited for (a loss or a cancel still ends the wait); one
        whose task does not run (queued behind other work) is hung.  A worker that
        does not answer within ``GRACE`` is busy too: it unpickles a task on its event
        loop, and a fresh worker imports torch there as its first task arrives.
        """
        pending: dict[str, list] = {}
        for name, f in zip(names, futures, strict=True):
            if not f.done():
                pending.setdefault(name, []).append(f.key)
        try:
            found = self.client.run(
                running_tasks,
                workers=list(pending),
                on_error="return",
                callback_timeout=GRACE,
            )
        except (TimeoutError, asyncio.TimeoutError):  # busy, as its docstring says
            return True
        except Exception:  # the scheduler or the comms failed: no sign it runs
            return False
        return all(
            isinstance(found.get(name), list) and set(keys) <= set(found[name])
            for name, keys in pending.items()
        )

    def _results(self, futures: list, what: str, collective: bool, ranks: list) -> list:
        """The done futures' results, or the error of the first that failed, located."""
        __tracebackhide__ = True
        names = [self.names[r] for r in ranks]
        if any(f.status in ("error", "cancelled") for f in futures):
            # a peer's death fails the others; a task of a dead worker may be cancelled
            alive = scheduler_identity(self.client)["workers"]
            self.check_lost(what, collective, ranks, names, alive)
        if any(f.status == "cancelled" for f in futures):
            self._broken_by(collective, f"a {what} was cancelled")
            raise SchedulerError(f"{what} tasks were cancelled outside labkit")
        for rank, name, f in zip(ranks, names, futures, strict=True):
            if f.status == "error":
                if not isinstance(f.exception(), LabkitError):
                    # a rank's own error (located) leaves the ranks agreed; others do not
                    self._broken_by(collective, f"a {what} failed")
                raise for_caller(client_error(f, rank, name))
        deadline = time.monotonic() + self.timeout + GRACE
        while True:
            try:
                return [f.result(timeout=1.0) for f in futures]
            except (TimeoutError, asyncio.TimeoutError):
                # a result held by a worker that died since is lost (its future went back
                # to pending, and a task bound to that worker never runs again)
                stuck = [a for a, f in zip(names, futures, strict=True) if not f.done()]
                self.check_lost(what, collective, ranks, stuck, self.alive())
                if time.monotonic() > deadline:
                    self._broken_by(collective, f"a {what} lost its results")
                    raise SchedulerError(
                        f"{what} results were lost", device=", ".join(stuck)
                    ) from None

    def _broken_by(self, collective: bool, why: str) -> None:
        """A collective cut short breaks the group (its ranks no longer agree)."""
        if collective:
            self.broken = why

    def check_lost(self, what, collective, ranks, candidates, alive, **where) -> None:
        """Raise a WorkerLostError naming the first rank among ``candidates`` whose worker left."""
        for rank in ranks:
            name = self.names[rank]
            if name in candidates and name not in alive:
                self._broken_by(collective, f"the worker of replica {rank} was lost")
                raise WorkerLostError(
                    f"the worker of replica {rank} was lost during a {what}; the replica group "
                    "is broken: close the trainer (it tears the group down) and start a new "
                    "one once the cluster has its workers back",
                    replica=rank,
                    worker=name,
                    **where,
                )

    def check_batch(self, what: str, collective: bool = False) -> None:
        """Raise the scheduler's cancel or shutdown here; a cut collective breaks the group."""
        try:
            self.batch.check()
        except LabkitError:
            self._broken_by(collective, f"a {what} was cancelled")
            raise

    def alive(self) -> set:
        """Addresses of the cluster's workers now."""
        return set(scheduler_identity(self.client)["workers"])


def running_tasks(dask_worker=None) -> list:
    """The keys this worker runs now: in a thread of its pool, or seceded from it."""
    if dask_worker is None:
        return []
    return [
        key
        for key, ts in dask_worker.state.tasks.items()
        if ts.state in ("executing", "long-running")
    ]


def _wait_all(futures, timeout: float) -> None:
    """Wait until every future is done, on the futures' own client; TimeoutError if not.

    ``distributed.wait`` uses the process's default client, the newest one: with a
    second client open it never saw the steps end before its timeout.
    """
    deadline = time.monotonic() + timeout
    for f in futures:
        if not f.done():
            f.exception(timeout=max(1e-3, deadline - time.monotonic()))


def client_error(future, rank: int, name: str) -> LabkitError:
    """The error of rank ``rank``'s failed ``future``, located at the replica and its worker."""
    exc = future.exception()
    if isinstance(exc, LabkitError):
        return exc.locate(replica=rank, device=name)
    tb = future.traceback()
    text = "".join(traceback.format_tb(tb)) if tb is not None else None
    return TaskError.from_exception(exc, text, what=f"replica {rank}", replica=rank, device=name)


def _from_dask(exc: BaseException) -> bool:
    """Whether ``exc`` is Dask's (or its comms') own, not the user's code's."""
    module = type(exc).__module__ or ""
    return module.split(".")[0] in ("distributed", "tornado", "asyncio") or isinstance(
        exc, (concurrent.futures.CancelledError, asyncio.CancelledError, OSError)
    )
