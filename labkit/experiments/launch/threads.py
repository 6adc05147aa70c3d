"""Trials in this process: one at a time in the sweep's thread, or on an in-process cluster's threads.

* :class:`InlineLauncher` (:data:`~.placement.Where.INLINE`, a
  ``LocalScheduler``): one trial at a time, in the sweep's own thread.
* :class:`ThreadLauncher` (:data:`~.placement.Where.THREADS`, a
  ``DaskScheduler`` whose workers are threads of this process): one long
  task a slot on the cluster, which runs trial after trial as the sweep hands
  them out, so a trial costs no task round trip; reports reach the sweep
  directly.  A trial function that holds the GIL
  (``lk.FunctionCallable(fn, holds_gil=True)``) runs in the scheduler's
  offload pool of processes instead, as ``"auto"`` does for every GIL-holding task.
"""

from __future__ import annotations

import logging
import uuid
import weakref

from ...events import TaskInfo
from .execution import CtrlCWatch, OffloadTrial, run_offloaded
from .launcher import Launcher, usable_workers

__all__ = ["InlineLauncher", "ThreadLauncher"]

logger = logging.getLogger("labkit.experiments")

# Launchers of running sweeps on in-process clusters, by token: a slot's task finds its
# launcher here (a token pickles as a string, so Dask may unpickle it at any time).
_THREAD_LAUNCHERS: dict = {}
_THREADS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # scheduler -> threads


class InlineLauncher(Launcher):
    """Trials one at a time in the sweep's thread (``LocalScheduler``)."""

    def __init__(self, *args):
        super().__init__(*args)
        #: a trial's own KeyboardInterrupt fails it; a real Ctrl-C stops the sweep (one
        #: watch the sweep: a trial costs no swap of the signal handler)
        self.ctrl_c = CtrlCWatch()

    def open(self, scope) -> None:
        """No tasks to open; the Ctrl-C watch starts (in the main thread)."""
        self.ctrl_c.start()

    def close(self) -> None:
        self.ctrl_c.stop()
        super().close()

    def fill(self) -> None:
        state = self.engine.take()
        if state is not None:
            self.ctrl_c.next_trial()
            try:
                self.run_here(state, "local", scheduler=self.scheduler)
            except BaseException:
                # the user's Ctrl-C: the trial ran in this very thread, so it is over;
                # recorded cancelled now, the wind-down has nothing to wait for
                self.engine.cancel()
                self.engine.cancel_launched()
                raise


class ThreadLauncher(Launcher):
    """One long task a slot on an in-process cluster, running trial after trial."""

    pulls = True

    def __init__(self, *args):
        super().__init__(*args)
        self.runners = 0
        self._futures: dict = {}  # runner number -> its future
        self._numbers = 0
        self.token = uuid.uuid4().hex
        self._offload: OffloadTrial | None = None
        self._workers: tuple = ()
        if self.holds_gil and self.scheduler.offload_pool is not None:
            self._offload = OffloadTrial(self.fn)

    def threads(self) -> int:
        held = _THREADS.get(self.scheduler)
        if held is None:  # an in-process cluster does not grow: asked once
            held = _THREADS[self.scheduler] = self.cluster_threads()
        return held

    def open(self, scope) -> None:
        super().open(scope)
        self._slots = self.slots()  # an in-process cluster does not grow
        self._workers = tuple(usable_workers(self.scheduler, self.scheduler.client.nthreads()))
        _THREAD_LAUNCHERS[self.token] = self

    def close(self) -> None:
        _THREAD_LAUNCHERS.pop(self.token, None)  # a slot's task that starts late ends at once
        super().close()

    def fill(self) -> None:
        engine = self.engine
        with engine.lock:
            wanted = min(self._slots, self.runners + len(engine.pending))
            new = max(0, wanted - self.runners)
            self.runners += new
        for _ in range(new):
            self._numbers += 1
            number = self._numbers
            future = self.scheduler.client.submit(
                _run_slot,
                self.token,
                number,
                key=f"labkit-trials-{engine.scope.id}-{number}",
                pure=False,
                **self.submit_options(),
            )
            self._futures[number] = future
            self.batch.track([future])
            future.add_done_callback(lambda f, n=number: self._runner_done(n, f))

    def _runner_done(self, number: int, future) -> None:
        if self._futures.pop(number, None) is not None and self.batch is not None:
            self.batch.untrack([future])
        if future.status == "error":
            logger.error("labkit: a trial runner failed: %r", future.exception())
        self.engine.wake()

    def runner(self, number: int) -> None:
        """On a worker thread: take trials and run them until none is left."""
        from distributed import get_worker

        worker = f"{get_worker().address} #{number}"
        while True:
            with self.engine.lock:
                state = self.engine.take()
                if state is None:
                    self.runners -= 1
                    break
            if self._offload is not None:
                self._run_offloaded(state, worker, self._offload)
            else:
                self.run_here(state, worker, self._workers, self.scheduler)
        future = self._futures.pop(number, None)
        if future is not None:  # done here: nothing of it for the batch to cancel
            self.batch.untrack([future])
        self.engine.wake()

    def _run_offloaded(self, state, worker: str, offload: OffloadTrial) -> None:
        engine = self.engine
        spec = {
            "trial": state.id,
            "config": state.config,
            "attempt": state.attempts,
            "metric": engine.metric,
        }
        info = TaskInfo(engine.scope.id, state.id, state.id, kind="trial")
        try:
            execution, outcome = run_offloaded(
                engine, self.scheduler.offload_pool, offload, spec, info, worker
            )
        except Exception as exc:
            logger.exception("labkit: running trial %d in a process failed", state.id)
            execution, outcome = None, {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}
        engine.finished(state.id, execution, outcome)


def _run_slot(token: str, number: int) -> None:
    """The task of one slot on an in-process cluster: trials of the sweep ``token``."""
    launcher = _THREAD_LAUNCHERS.get(token)
    if launcher is not None:
        launcher.runner(number)
