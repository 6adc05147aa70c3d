"""Where trials run: in this thread, on the threads of an in-process cluster, on worker processes.

A launcher starts trials as slots free up and makes the engine's stops
happen.  One per kind of scheduler:

* :class:`InlineLauncher` (``LocalScheduler``): one trial at a time, in the
  sweep's own thread.
* :class:`ThreadLauncher` (a ``DaskScheduler`` whose workers are threads of
  this process, ``mode="auto"`` or ``"threads"``): one long task a slot on
  the cluster, which runs trial after trial as the sweep hands them out, so a
  trial costs no task round trip; reports reach the sweep directly.  A trial
  function that holds the GIL (``lk.FunctionCallable(fn, holds_gil=True)``)
  runs in the scheduler's offload pool of processes instead, as ``"auto"``
  does for every GIL-holding task.
* :class:`RemoteLauncher` (worker processes, or a cluster reached by
  address): each trial is one task of its own (:func:`~.execution.run_remote`);
  its reports come back through Dask's event stream on a topic of the sweep.
  Slots are the cluster's threads; as many trials again wait in Dask's queue
  so a slot never idles while the client answers.  A worker that dies under a
  trial: Dask runs the task again elsewhere and the trial restores the latest
  checkpoint, which the client keeps on the scheduler for it (see
  :meth:`RemoteLauncher.checkpointed`); after ``max_failures`` the trial fails.

A trial takes ``workers_per_trial`` slots (1 by default): a trial that is
itself parallel (a data-parallel trainer over devices of its process, Dask
tasks of its own) leaves the cluster room for that work.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import queue
import threading
import time
import uuid
import weakref

from ..events import TaskInfo
from ..scheduling.dask_adapter import forget_on_scheduler
from .execution import OffloadTrial, execute, run_offloaded, run_remote, watch_ctrl_c
from .sinks import DirectSink, clear_stops, metadata_keys, new_execution, request_stop
from .trial import Trial

__all__ = ["launcher_for", "InlineLauncher", "ThreadLauncher", "RemoteLauncher"]

logger = logging.getLogger("labkit.experiments")

# Launchers of running sweeps on in-process clusters, by token: a slot's task finds its
# launcher here (a token pickles as a string, so Dask may unpickle it at any time).
_THREAD_LAUNCHERS: dict = {}
_THREADS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # scheduler -> threads


def launcher_for(
    scheduler, engine, fn, holds_gil: bool, workers_per_trial: int, max_concurrent: int | None
):
    """The launcher that suits ``scheduler``."""
    if not hasattr(scheduler, "client"):
        kind = InlineLauncher
    elif scheduler.in_process:
        kind = ThreadLauncher
    else:
        kind = RemoteLauncher
    return kind(scheduler, engine, fn, holds_gil, workers_per_trial, max_concurrent)


class Launcher:
    """What every launcher does; the hooks the engine and the loop call."""

    #: Whether running trials take the next one themselves (the loop need not be woken).
    pulls = False

    def __init__(self, scheduler, engine, fn, holds_gil, workers_per_trial, max_concurrent):
        self.scheduler, self.engine, self.fn = scheduler, engine, fn
        self.holds_gil = holds_gil
        self.workers_per_trial, self.max_concurrent = workers_per_trial, max_concurrent
        self.batch = None

    def open(self, scope) -> None:
        """Start: a batch of the scheduler for the sweep's tasks (a cancel reaches them)."""
        self.batch = self.scheduler.batch(
            info=TaskInfo(scope.id, -1, -1, kind="trial"), control=scope.control
        )

    def threads(self) -> int:
        return 1

    def slots(self) -> int:
        """Trials that may run at once."""
        n = max(1, self.threads() // self.workers_per_trial)
        return min(n, self.max_concurrent) if self.max_concurrent else n

    def fill(self) -> None:
        """Start trials while slots are free."""

    def handle(self, item) -> None:
        """An item of the engine's inbox other than a wake-up."""

    def poll(self) -> None:
        """Now and then, on the loop's thread."""

    def check(self) -> None:
        """Raise a cancel or shutdown of the scheduler."""
        if self.batch is not None:
            self.batch.check()

    def stop(self, state) -> None:
        """The engine stopped ``state`` (called under its lock; direct sinks need nothing)."""

    def checkpointed(self, state, seq: int, blob: bytes) -> None:
        """``state`` took a checkpoint (under the engine's lock)."""

    def ended(self, state) -> None:
        """``state`` ended (under the engine's lock)."""

    def close(self) -> None:
        if self.batch is not None:
            self.batch.close()

    def run_here(self, state, worker: str) -> None:
        """Run ``state`` on this thread (direct sink) and tell the engine how it ended."""
        engine, execution = self.engine, new_execution()
        try:
            engine.started(state.id, execution, worker)
            sink = DirectSink(engine, state.id, execution)
            trial = Trial(state.id, state.config, sink, engine.attempt(state.id), engine.metric)
            outcome = execute(self.fn, trial)
        except Exception as exc:  # not the trial's own error (those are in the outcome)
            logger.exception("labkit: running trial %d failed", state.id)
            outcome = {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}
        except BaseException as exc:
            if threading.current_thread() is threading.main_thread():
                raise  # the user's Ctrl-C in the sweep's own thread: the loop winds down
            outcome = {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}
        engine.finished(state.id, execution, outcome)


class InlineLauncher(Launcher):
    """Trials one at a time in the sweep's thread (``LocalScheduler``)."""

    def open(self, scope) -> None:
        """Nothing to open: no tasks."""

    def fill(self) -> None:
        state = self.engine.take()
        if state is not None:
            with watch_ctrl_c():  # a trial's own KeyboardInterrupt fails it; Ctrl-C stops all
                self.run_here(state, "local")


class ThreadLauncher(Launcher):
    """One long task a slot on an in-process cluster, running trial after trial."""

    pulls = True

    def __init__(self, *args):
        super().__init__(*args)
        self.runners = 0
        self._futures: dict = {}  # runner number -> its future
        self._numbers = 0
        self.token = uuid.uuid4().hex
        self._offload = None
        if self.holds_gil and self.scheduler.offload_pool is not None:
            self._offload = OffloadTrial(self.fn)

    def threads(self) -> int:
        held = _THREADS.get(self.scheduler)
        if held is None:  # an in-process cluster does not grow: asked once
            held = _THREADS[self.scheduler] = sum(self.scheduler.client.nthreads().values()) or 1
        return held

    def open(self, scope) -> None:
        super().open(scope)
        self._slots = self.slots()  # an in-process cluster does not grow
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
                self._run_offloaded(state, worker)
            else:
                self.run_here(state, worker)
        future = self._futures.pop(number, None)
        if future is not None:  # done here: nothing of it for the batch to cancel
            self.batch.untrack([future])
        self.engine.wake()

    def _run_offloaded(self, state, worker: str) -> None:
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
                engine, self.scheduler.offload_pool, self._offload, spec, info, worker
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


class RemoteLauncher(Launcher):
    """Each trial one task on a worker process; reports through Dask's event stream."""

    #: Seconds to wait for a finished task's last message before taking its result.
    END_WAIT = 2.0

    def __init__(self, *args):
        super().__init__(*args)
        import cloudpickle

        self.client = self.scheduler.client
        self.token = uuid.uuid4().hex[:12]
        self.topic = f"labkit-sweep-{self.token}"
        self.blob = cloudpickle.dumps(self.fn)
        self.inflight: dict = {}  # trial -> its task's future
        self.parked: dict = {}  # trial -> (deadline, outcome): done, last message due
        self._threads, self._asked = 1, 0.0
        self._published: set = set()
        self._durations: collections.deque = collections.deque(maxlen=16)
        self.closed = False

    def threads(self) -> int:
        if time.monotonic() - self._asked > 2.0:  # workers come and go
            self._threads = sum(self.client.nthreads().values()) or 1
            self._asked = time.monotonic()
        return self._threads

    def open(self, scope) -> None:
        super().open(scope)
        inbox = self.engine.inbox
        self.client.subscribe_topic(self.topic, lambda event: inbox.put(("event", event[1])))

    def fill(self) -> None:
        slots = self.slots()
        # as many trials again queued in Dask, ready for a free slot (more when trials are
        # short: then the client's round trip between two trials is what a slot waits for)
        ahead = 0 if self.max_concurrent else slots * (4 if self._short() else 1)
        while len(self.inflight) < slots + ahead:
            state = self.engine.take()
            if state is None:
                return
            self._submit(state)

    def _short(self) -> bool:
        """Whether recent trials took less than 50 ms each."""
        recent = sorted(self._durations)
        return len(recent) >= 4 and recent[len(recent) // 2] < 0.05

    def _submit(self, state) -> None:
        restore = None
        if state.attempts or state.seq:
            blob = self.engine.restore_blob(state.id)
            restore = None if blob is None else (state.seq, blob)
        spec = {
            "token": self.token,
            "trial": state.id,
            "config": state.config,
            "attempt": state.attempts,
            "restore": restore,
            "metric": self.engine.metric,
        }
        future = self.client.submit(
            run_remote,
            self.blob,
            spec,
            self.topic,
            pure=False,
            key=f"labkit-trial-{self.token}-{state.id}-{state.attempts}-{uuid.uuid4().hex[:6]}",
        )
        self.inflight[state.id] = future
        self.batch.track([future])
        future.add_done_callback(lambda f, t=state.id: self._task_done(t, f))

    def _task_done(self, trial: int, future) -> None:
        """A task ended (a Dask thread): its future goes to the loop, unless the sweep ended.

        A future held anywhere keeps its task's key on the scheduler; once the
        sweep closed, nothing may hold one (its engine and launcher live on
        in a reference cycle until the garbage collector comes by).
        """
        if not self.closed:
            self.engine.inbox.put(("done", trial, future))

    def handle(self, item) -> None:
        kind = item[0]
        if kind == "event":
            self._message(item[1])
        elif kind == "done":
            self._done(item[1], item[2])
        elif kind == "stop":
            self._send_stop(item[1])

    def _message(self, msg: dict) -> None:
        engine, kind, trial, execution = self.engine, msg["kind"], msg["trial"], msg["exec"]
        if kind == "start":
            engine.started(trial, execution, msg["worker"])
        elif kind == "reports":
            engine.reported(trial, execution, [tuple(r) for r in msg["reports"]])
        elif kind == "checkpoint":
            engine.checkpointed(trial, execution, msg["step"], msg["blob"])
        elif kind == "end":
            engine.finished(trial, execution, msg["outcome"])

    def _done(self, trial: int, future) -> None:
        """A trial's task ended: its result waits for its last message, a fault restarts it."""
        if self.inflight.get(trial) is not future:
            return  # a task of an execution given up
        self.batch.untrack([future])
        if future.status == "finished":
            self.parked[trial] = (time.monotonic() + self.END_WAIT, future.result())
            return
        if future.status == "cancelled" and self.engine.check_cancel():
            return  # the sweep's cancel: its trials stop through their flags
        self.inflight.pop(trial, None)
        if future.status == "cancelled":
            outcome = {"status": "lost", "error": "its task was cancelled outside the sweep"}
        else:
            error = future.exception()
            name = type(error).__name__
            outcome = {
                "status": "lost" if name == "KilledWorker" else "failed",
                "error": f"{name}: {error}",
            }
        self.engine.finished(trial, None, outcome)

    def poll(self) -> None:
        now = time.monotonic()
        for trial, (deadline, outcome) in list(self.parked.items()):
            if now >= deadline:
                self.parked.pop(trial, None)
                self.engine.finished(trial, outcome.get("exec"), outcome)

    def stop(self, state) -> None:
        self.engine.inbox.put(("stop", state.id))  # client.run waits: not under the lock

    def _send_stop(self, trial: int) -> None:
        state = self.engine.states[trial]
        if state.status == "running" and state.worker:
            try:
                self.client.run(
                    request_stop, self.token, trial, workers=[state.worker], on_error="ignore"
                )
            except Exception:  # its worker is gone: a rerun elsewhere sees the stop at once
                pass
        elif state.launched and state.status == "pending":  # queued, not started: take it back
            future = self.inflight.get(trial)
            if future is not None:
                self.client.cancel([future])
            self.engine.finished(trial, None, {"status": "stopped"})

    def checkpointed(self, state, seq: int, blob: bytes) -> None:
        """Keep the latest checkpoint on the scheduler: a rerun of the task restores it."""
        self._published.add(state.id)
        self._metadata(metadata_keys(self.token, state.id), {"seq": seq, "blob": blob})

    def _metadata(self, keys, value) -> None:
        try:
            asyncio.run_coroutine_threadsafe(
                self.client.scheduler.set_metadata(keys=keys, value=value),
                self.client.loop.asyncio_loop,
            )
        except Exception:  # the client is closing
            pass

    def ended(self, state) -> None:
        if state.started is not None and state.status == "completed":
            self._durations.append(state.ended - state.started)
        future = self.inflight.pop(state.id, None)
        self.parked.pop(state.id, None)
        if future is not None:
            self.batch.untrack([future])
            if not future.done():
                self.client.cancel([future])
        if state.id in self._published:
            self._published.discard(state.id)
            self._metadata(metadata_keys(self.token, state.id), None)

    def close(self) -> None:
        self.closed = True
        futures = list(self.inflight.values())
        self.inflight.clear()
        self.parked.clear()
        self._drop_queued_futures()
        try:
            self.client.unsubscribe_topic(self.topic)
            self.client.cancel(futures)
            self.client.run(clear_stops, self.token, on_error="ignore")
            forget_on_scheduler(self.client, self.topic, "labkit-sweeps", self.token)
        except Exception:  # the cluster is gone already
            pass
        super().close()
        self._drop_queued_futures()  # those queued meanwhile

    def _drop_queued_futures(self) -> None:
        """Empty the engine's inbox of what the loop will never handle (futures among it)."""
        inbox = self.engine.inbox
        while True:
            try:
                inbox.get_nowait()
            except queue.Empty:
                return
