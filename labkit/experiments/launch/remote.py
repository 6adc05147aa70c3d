"""Trials on a cluster on other hosts (or with slots off): each trial one task of its own.

Worker processes of this machine run trials in slots instead
(:mod:`.slots`); this is the route that asks nothing of the workers
but Dask itself.

Each trial is one task (:func:`~.execution.run_remote`); its reports come
back through Dask's event stream on a topic of the sweep.  Slots are the
cluster's threads; as many trials again wait in Dask's queue so a slot never
idles while the client answers.  A worker that dies under a trial: Dask runs
the task again elsewhere and the trial restores the latest checkpoint, which
the client keeps on the scheduler for it (see
:meth:`RemoteLauncher.checkpointed`); after ``max_failures`` the trial fails.
A worker that left gracefully (retired: ``client.retire_workers``, its
``lifetime``, an adaptive scale-down) is no failure: Dask's rerun of the
task goes on from the checkpoint as a *move* (the record's ``moves``).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import queue
import time
import uuid

from ...scheduling.dask.connect import cancel_futures
from ...scheduling.dask.dask_adapter import forget_on_scheduler, left_gracefully, watch_retirements
from ..trials.checkpoint_place import ref_fields
from .channel import FIELDS, deliver
from .execution import run_remote
from .launcher import Launcher, Recent
from .sinks import clear_stops, metadata_keys, request_stop

__all__ = ["RemoteLauncher"]

logger = logging.getLogger("labkit.experiments")


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
        self._threads = Recent(self.cluster_threads)  # a restricted scheduler's workers alone
        self._published: set = set()
        self._durations: collections.deque = collections.deque(maxlen=16)
        self.closed = False

    def threads(self) -> int:
        return self._threads()

    def open(self, scope) -> None:
        super().open(scope)
        watch_retirements(self.client)  # a retired worker's trial moves, not fails
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
            ref = self.engine.restore_blob(state.id)
            restore = None if ref is None else (state.seq, ref_fields(ref))
        spec = {
            "token": self.token,
            "trial": state.id,
            "config": state.config,
            "attempt": state.attempts,
            "restore": restore,
            "metric": self.engine.sweep.reported,
        }
        future = self.client.submit(
            run_remote,
            self.blob,
            spec,
            self.topic,
            pure=False,
            key=f"labkit-trial-{self.token}-{state.id}-{state.attempts}-{uuid.uuid4().hex[:6]}",
            **self.submit_options(),
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
        """One message of a trial's event stream to the engine."""
        kind = msg["kind"]
        if kind == "start" and self._moved(msg["trial"], msg["worker"]):
            logger.info("labkit: trial %d moves to %s", msg["trial"], msg["worker"])
        fields = [msg[name] for name in FIELDS[kind]]
        if kind == "reports":  # lists on the wire
            fields = [[tuple(r) for r in msg["reports"]]]
        deliver(self.engine, kind, msg["trial"], msg["exec"], *fields)

    def _moved(self, trial: int, worker: str) -> bool:
        """Whether Dask's rerun of ``trial``'s task on ``worker`` follows a retirement: then the
        run before ends as a move, and the rerun goes on as the trial's next run.

        Dask ran the task again because the worker it ran on left: a loss,
        unless the scheduler retired that worker (then the engine hears a
        ``moved`` end, and the rerun is marked launched so that it is not
        submitted a second time).  On the loop's thread, as ``fill`` is.
        """
        engine = self.engine
        with engine.lock:
            state = engine.states[trial]
            before = state.worker
            if state.status != "running" or state.execution is None or before in ("", worker):
                return False
        if not left_gracefully(self.client, [before]):
            return False
        with engine.lock:
            engine.finished(
                trial, state.execution, {"status": "moved", "error": f"its worker {before} left"}
            )
            if (
                state.status != "pending"
            ):  # it ended (stopped, cancelled): the rerun's start is late
                return False
            state.launched = True  # Dask's rerun is its run: never submitted again
        return True

    def _done(self, trial: int, future) -> None:
        """A trial's task ended: its result waits for its last message, a fault restarts it."""
        if trial not in self.inflight or self.inflight[trial] is not future:
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
            # its worker may be gone: a rerun elsewhere sees the stop at once
            with contextlib.suppress(Exception):
                self.client.run(
                    request_stop, self.token, trial, workers=[state.worker], on_error="ignore"
                )
        elif state.launched and state.status == "pending":  # queued, not started: take it back
            future = self.inflight.get(trial)
            if future is not None:
                cancel_futures(self.client, [future])
            self.engine.finished(trial, None, {"status": "stopped"})

    def checkpointed(self, state, seq: int, ref) -> None:
        """Keep the latest checkpoint's reference on the scheduler: a rerun of the task restores it."""
        self._published.add(state.id)
        self._metadata(metadata_keys(self.token, state.id), {"seq": seq, "ref": ref_fields(ref)})

    def _metadata(self, keys, value) -> None:
        with contextlib.suppress(Exception):  # the client is closing
            asyncio.run_coroutine_threadsafe(
                self.client.scheduler.set_metadata(keys=keys, value=value),
                self.client.loop.asyncio_loop,
            )

    def ended(self, state) -> None:
        if state.started is not None and state.status == "completed":
            self._durations.append(state.ended - state.started)
        future = self.inflight.pop(state.id, None)
        self.parked.pop(state.id, None)
        if future is not None:
            self.batch.untrack([future])
            if not future.done():
                cancel_futures(self.client, [future])
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
            cancel_futures(self.client, futures)
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
