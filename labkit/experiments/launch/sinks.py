"""Where a trial's reports and checkpoints go, wherever the trial runs: the channels.

Every sink is a :class:`~.channel.TrialChannel`: ``start`` and ``end``
(called where the trial runs, around it), and the four calls of
:class:`~.trial.Trial`: ``report`` (returns whether the trial must stop),
``checkpoint``, ``restore`` and ``stopped``.

* :class:`DirectSink`: the trial runs in the client's process (a thread of an
  in-process cluster, or the :class:`~labkit.LocalScheduler`); reports reach the
  sweep at once and its rule decides within the same call.
* :class:`~.slot.SlotSink` (in :mod:`.slot`): the trial runs in a slot on a
  worker process of this machine; reports go over the slot's socket.
* :class:`EventSink`: the trial runs in a Dask worker process as a task of its own; reports are
  gathered and sent through Dask's event stream (``log_event``) at most every
  :data:`REPORT_EVERY` seconds (a :class:`~labkit.scheduling.workers.gathering.Gathering`,
  as :mod:`labkit.data_parallel.reports` gathers a fit's); a stop arrives as a flag set by ``client.run`` (:func:`request_stop`).
* :class:`PipeSink`: the trial runs in a process of an offload pool (a
  GIL-holding trial beside an in-process cluster); each call is a round trip
  over a socket to the thread that runs its task.
"""

from __future__ import annotations

import os
import threading
import uuid

from ...scheduling.workers.gathering import Gathering
from ..trials.checkpoint_place import as_ref, ref_fields

__all__ = [
    "forget_stop",
    "MemorySink",
    "DirectSink",
    "EventSink",
    "PipeSink",
    "REPORT_EVERY",
    "request_stop",
    "clear_stops",
    "metadata_keys",
    "new_execution",
]

#: Least seconds between two messages of reports from a trial on a worker process.
REPORT_EVERY = 0.05

# On a worker process: (sweep token, trial) of the trials the client stopped.
_STOPS: set = set()
_STOPS_LOCK = threading.Lock()


def new_execution() -> str:
    """A fresh id for one run of a trial's function (a rerun after a lost worker gets another)."""
    return uuid.uuid4().hex[:10]


def request_stop(token: str, trial: int) -> None:
    """On a worker (``client.run``): the trial's next report raises TrialStopped."""
    with _STOPS_LOCK:
        _STOPS.add((token, trial))


def clear_stops(token: str) -> None:
    """On a worker (``client.run``): forget the stops of sweep ``token`` (it ended)."""
    with _STOPS_LOCK:
        for key in [k for k in _STOPS if k[0] == token]:
            _STOPS.discard(key)


def forget_stop(token: str, trial: int) -> None:
    """Forget a stop asked of ``trial`` of the sweep ``token`` (its task ended)."""
    with _STOPS_LOCK:
        _STOPS.discard((token, trial))


def metadata_keys(token: str, trial: int) -> list:
    """Where the scheduler keeps a remote trial's latest checkpoint (for a rerun elsewhere)."""
    return ["labkit-sweeps", token, str(trial)]


class MemorySink:
    """Keeps everything here and never stops the trial (for trying a function by hand)."""

    def __init__(self):
        self.reports: list = []
        self.ref = None  # the latest checkpoint's reference
        self.outcome: dict | None = None

    def start(self) -> None:
        """Nothing to tell."""

    def report(self, step, metrics, t) -> bool:
        self.reports.append((step, metrics, t))
        return False

    def checkpoint(self, step, ref) -> None:
        self.ref = ref

    def restore(self):
        return self.ref

    def stopped(self) -> bool:
        return False

    def end(self, outcome: dict) -> None:
        self.outcome = outcome


class DirectSink:
    """A trial in the client's process: each call goes straight to the sweep."""

    def __init__(self, engine, trial: int, execution: str, worker: str = ""):
        self.engine, self.trial, self.execution, self.worker = engine, trial, execution, worker

    def start(self) -> None:
        self.engine.started(self.trial, self.execution, self.worker)

    def report(self, step, metrics, t) -> bool:
        return self.engine.reported(self.trial, self.execution, [(step, metrics, t)])

    def checkpoint(self, step, ref) -> None:
        self.engine.checkpointed(self.trial, self.execution, step, ref)

    def restore(self):
        return self.engine.restore_blob(self.trial)

    def stopped(self) -> bool:
        return self.engine.stop_requested(self.trial, self.execution)

    def end(self, outcome: dict) -> None:
        self.engine.finished(self.trial, self.execution, outcome)


class EventSink:
    """A trial on a Dask worker process: messages on ``topic``, reports gathered.

    Every message is a dict naming ``kind`` (``start``, ``reports``,
    ``checkpoint``, ``end``), the ``trial`` and the ``exec``\\ ution; they reach
    the client in the order they were sent.
    """

    def __init__(
        self,
        topic: str,
        token: str,
        trial: int,
        execution: str,
        restore: tuple | None = None,
        every: float = REPORT_EVERY,
    ):
        from distributed import get_worker

        self.worker = get_worker()
        self.topic, self.token, self.trial, self.execution = topic, token, trial, execution
        self._restore = restore  # (seq, the reference's fields) the client sent with the task
        # the first report goes at once; later ones together, at most every ``every`` s
        self.reports = Gathering(
            lambda reports, _: self.send("reports", reports=reports), every, first_at_once=True
        )

    @property
    def sent(self) -> int:
        """Reports sent so far."""
        return self.reports.sent

    def send(self, kind: str, **fields) -> None:
        """One message to the client (through the scheduler)."""
        self.worker.log_event(
            self.topic, {"kind": kind, "trial": self.trial, "exec": self.execution, **fields}
        )

    def start(self, attempt: int = 0) -> None:
        """The first message: the trial's worker, process and ``attempt``."""
        self.send("start", worker=self.worker.address, pid=os.getpid(), attempt=attempt)

    def runs_before(self) -> int:
        """How often the scheduler ran this task before (Dask reruns one whose worker died).

        Counted on the scheduler, under the sweep's entry of its task metadata
        (dropped when the sweep ends); 0 when the scheduler cannot be asked.
        """
        from distributed.utils import sync

        keys = ["labkit-sweeps", self.token, "runs", str(self.worker.get_current_task())]
        try:
            runs = sync(self.worker.loop, self.worker.scheduler.get_metadata, keys=keys, default=0)
            sync(self.worker.loop, self.worker.scheduler.set_metadata, keys=keys, value=runs + 1)
        except Exception:  # the scheduler is unreachable: the count the task came with
            return 0
        return int(runs or 0)

    def report(self, step, metrics, t) -> bool:
        self.reports.add([step, metrics, t])
        return self.stopped()

    def flush(self) -> None:
        """Send the reports gathered so far."""
        self.reports.flush()

    def checkpoint(self, step, ref) -> None:
        self.flush()  # the checkpoint follows the reports it comes after
        self.send("checkpoint", step=step, ref=ref_fields(ref))  # plain data: msgpack carries it

    def restore(self):
        """The newest of: what came with the task, what the scheduler holds (a rerun)."""
        from distributed.utils import sync

        best = self._restore
        try:
            held = sync(
                self.worker.loop,
                self.worker.scheduler.get_metadata,
                keys=metadata_keys(self.token, self.trial),
                default=None,
            )
        except Exception:  # the scheduler is unreachable: what came with the task
            held = None
        if held and (best is None or held["seq"] > best[0]):
            best = (held["seq"], held["ref"])
        return None if best is None else as_ref(best[1])

    def stopped(self) -> bool:
        return (self.token, self.trial) in _STOPS

    def end(self, outcome: dict) -> None:
        """The last message: what the trial came to (after its last reports)."""
        self.flush()
        self.send("end", outcome=outcome)


class PipeSink:
    """A trial in an offload process: each call a round trip to the task's thread."""

    def __init__(self, conn, restore=None):
        self.conn, self._restore = conn, restore
        self.attempt = 0

    def start(self) -> None:
        """Say hello (this process); the task's thread answers the checkpoint and the attempt.

        A process the pool starts again after one died gets the later ones.
        """
        self.conn.send(("start", os.getpid()))
        self._restore, self.attempt = self.conn.recv()

    def report(self, step, metrics, t) -> bool:
        self.conn.send(("reports", [(step, metrics, t)]))
        return self.conn.recv()

    def checkpoint(self, step, ref) -> None:
        self.conn.send(("checkpoint", step, ref))
        self.conn.recv()

    def restore(self):
        return self._restore

    def stopped(self) -> bool:
        self.conn.send(("stopped",))
        return self.conn.recv()

    def end(self, outcome: dict) -> None:
        """The last message (the outcome itself comes back as the task's result)."""
        self.conn.send(("end",))
