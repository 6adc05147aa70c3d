"""Trials on worker processes of this machine: slots as long tasks, trials handed over a socket.

:class:`SlotLauncher` starts one long Dask task a slot (:func:`~.slot.run_slot`)
on the cluster's threads, as the :class:`~.threads.ThreadLauncher` does on an
in-process cluster; each slot connects back to a listener of the sweep on
127.0.0.1 (authenticated with a key of the sweep's own) and takes trial
after trial through it.  One thread of the client serves each slot's line:
it takes the next trial from the engine (the engine's own ``take``, so
``max_concurrent``, stops and cancels hold as everywhere), sends it, and
hands the slot's reports, checkpoints and end to the engine as they come.
A trial so costs a message each way on one socket instead of a Dask task
and two trips through the scheduler.

A slot whose worker leaves gracefully (a retirement, a lifetime's end,
adaptive scale-down, a preemption notice: a SIGTERM to its worker process or
to its ``dask worker``, see :mod:`labkit.scheduling.dask.preemption`) says
``leaving`` and ends its trial as a move: the trial runs again on another slot
from its latest checkpoint, and its record counts a move, not a failure.  A
line that breaks under a trial unannounced (a SIGKILL) is a lost worker: the
same, but its ``max_failures`` counting; the slot's task is cancelled and the loop starts
a new one while trials wait, which Dask places on a free thread (a worker
that came back).  When the sweep ends or is cancelled every line is told
``bye`` and shut, and the slots' tasks are awaited (a little) so that none
is left running on the cluster.

Used where the scheduler listens on the loopback (so every worker runs on
this machine and reaches the client); a cluster reached on another host
keeps a task a trial (:mod:`.remote`).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import time
import uuid
from typing import Any

from ...errors import SchedulerError
from ...scheduling.dask.connect import cancel_futures
from ...scheduling.dask.dask_adapter import watch_retirements
from .channel import deliver
from .launcher import Launcher, Recent
from .listener import Listener
from .sinks import new_execution
from .slot import run_slot
from .slot_line import Line, no_delay

__all__ = ["SlotLauncher"]

logger = logging.getLogger("labkit.experiments")


class SlotLauncher(Launcher):
    """Slots as long tasks on worker processes of this machine, fed over sockets."""

    pulls = True

    #: Seconds :meth:`close` waits for the slots' tasks to end.
    END_WAIT = 2.0
    #: Slot tasks that end without reaching the client before the sweep gives up.
    UNREACHED = 3
    #: Most slot tasks kept for an adaptive cluster (one for each trial running or waiting).
    DEMAND = 256

    def __init__(self, *args):
        super().__init__(*args)
        import cloudpickle

        self.client = self.scheduler.client
        self.token = uuid.uuid4().hex[:12]
        self.blob = cloudpickle.dumps(self.fn)
        self.authkey = os.urandom(16)
        self.listener: Any = None
        self.tasks: dict = {}  # slot number -> its task's future (None while submitted)
        self.lines: dict = {}  # slot number -> its Line, while connected
        self.where: dict = {}  # trial -> the Line running it
        self.futures: set = set()  # slot tasks not done
        self._numbers = itertools.count(1)
        self._threads = Recent(self.cluster_threads)  # a restricted scheduler's workers alone
        self.unreached = 0
        self.closed = False

    def threads(self) -> int:
        return self._threads()

    def open(self, scope) -> None:
        super().open(scope)
        watch_retirements(self.client)  # a SIGTERM to a worker process: its slot says leaving
        # each slot's connection is authenticated (with a deadline) and served on its own thread
        self.listener = Listener(self.authkey, self._serve, f"labkit-sweep-{self.token}-slots")

    # -- slots' tasks -------------------------------------------------------------------------

    def fill(self) -> None:
        """Start slot tasks while trials wait and the cluster has room for more.

        On an adaptive cluster each trial that waits has a slot task queued as
        well (up to ``max_concurrent``, or :attr:`DEMAND`): Dask's adaptive
        target counts queued tasks, so the cluster grows for the sweep; those no
        trial waits for any more are cancelled, so that it shrinks as the sweep
        winds down.
        """
        engine, slots = self.engine, self.slots()  # slots() may ask the scheduler: not locked
        demand = (self.max_concurrent or self.DEMAND) if self.scheduler.adaptive else 0
        with engine.lock:
            if self.closed:
                return
            wanted = min(slots, len(self.tasks) + len(engine.pending))
            surplus: list = []
            if demand:  # a slot task for each trial running or waiting
                wanted = max(wanted, min(demand, len(self.where) + len(engine.pending)))
                surplus = self._surplus(wanted)
            numbers = [next(self._numbers) for _ in range(wanted - len(self.tasks))]
            for number in numbers:
                self.tasks[number] = None
        if surplus:
            cancel_futures(self.client, surplus)
        for number in numbers:
            future = self.client.submit(
                run_slot,
                self.listener.address,
                self.authkey,
                number,
                key=f"labkit-slot-{self.token}-{number}",
                pure=False,
                **self.submit_options(),  # a restricted scheduler's workers alone
            )
            with engine.lock:
                self.futures.add(future)
                if number in self.tasks:
                    self.tasks[number] = future
            self.batch.track([future])
            future.add_done_callback(lambda f, n=number: self._task_done(n, f))

    def _surplus(self, wanted: int) -> list:
        """Forget slot tasks beyond ``wanted`` that serve no line (queued: no trial waits
        for them); their futures, to cancel.  Under the engine's lock."""
        idle = [n for n, f in self.tasks.items() if f is not None and n not in self.lines]
        extra = idle[: max(0, len(self.tasks) - wanted)]
        return [self.tasks.pop(n) for n in extra]

    def _task_done(self, number: int, future) -> None:
        """A slot's task ended (a Dask thread): forget it; the loop starts another if needed."""
        with self.engine.lock:
            self.futures.discard(future)
            if number not in self.lines:  # a line still served keeps its place until it ends
                self.tasks.pop(number, None)
        if not self.closed:
            self.batch.untrack([future])
            if future.status == "finished" and future.result() == -1:
                self.unreached += 1
            elif future.status == "error":
                logger.error("labkit: a trial slot failed: %r", future.exception())
        self.engine.wake()

    def check(self) -> None:
        super().check()
        if self.unreached >= self.UNREACHED:
            raise SchedulerError(
                f"{self.unreached} trial slots on the cluster's workers could not connect "
                f"to this sweep's client at {self.listener.address}"
            )

    # -- lines --------------------------------------------------------------------------------

    def _serve(self, conn) -> None:
        """One slot's line: hand it a trial, follow it to its end, again, until none is left."""
        line = None
        try:
            line = self._greet(conn)
            while line is not None and self._feed(line) and self._follow(line):
                pass
        except Exception as exc:  # the line broke, or a malformed message (logged)
            if not isinstance(exc, (EOFError, OSError)):
                logger.exception("labkit: serving a trial slot failed")
            if line is not None:  # its trials must not be left running unseen
                self._lost(line)

    def _greet(self, conn) -> Line | None:
        """The slot's hello; the Line, or None (a slot of a task given up, told bye)."""
        no_delay(conn)
        first = conn.recv()
        hello = first[0]  # ("hello", number, worker, pid), maybe with "leaving" already
        with self.engine.lock:
            known = hello[1] in self.tasks and not self.closed
            line = Line(conn, hello[1], hello[2])
            line.leaving = any(m[0] == "leaving" for m in first)
            if known:
                self.lines[line.number] = line
        if not known:
            line.send(("bye",))
            return None
        line.send(("fn", self.token, self.blob, self.engine.metric))
        return line

    def _feed(self, line: Line) -> bool:
        """Send the line the next trial; False (and bye) when there is none."""
        engine = self.engine
        if line.leaving:  # its worker leaves: no trial for it; a new slot takes its place
            self._retire(line)
            return False
        with engine.lock:
            state = None if self.closed else engine.take()
            if state is None:
                self.lines.pop(line.number, None)
                self.tasks.pop(line.number, None)
            else:
                self.where[state.id] = line
                line.held[state.id] = new_execution()
        if state is None:
            line.send(("bye",))
            engine.wake()
            return False
        restore = engine.restore_blob(state.id) if state.attempts or state.seq else None
        spec = {
            "trial": state.id,
            "exec": line.held[state.id],
            "config": state.config,
            "attempt": state.attempts,
            "restore": restore,
        }
        line.send(("trial", spec))  # a broken line shows in _follow
        return True

    def _follow(self, line: Line) -> bool:
        """What the slot sends about its trial, to its end; False: the line broke."""
        while True:
            try:
                batch = line.conn.recv()
            except (EOFError, OSError):
                self._lost(line)
                return False
            ended = False
            for message in batch:
                ended = self._message(line, message) or ended
            if ended:
                return True

    def _message(self, line: Line, message: tuple) -> bool:
        """One message of the slot to the engine; whether it was a trial's end."""
        engine, kind, trial = self.engine, message[0], message[1]
        if kind == "leaving":  # its trial's end is a move; the line takes no other
            line.leaving = True
            return False
        if kind == "end":
            with engine.lock:
                if self.where.get(trial) is line:
                    del self.where[trial]
                line.held.pop(trial, None)
                line.stops.discard(trial)
        if kind == "start":  # the slot's worker, which the client knows
            message = (*message, line.worker)
        if deliver(engine, *message):  # a report's answer: stop
            line.stop(trial)
        return kind == "end"

    def _lost(self, line: Line) -> None:
        """The line broke (its worker died): its trial runs again elsewhere, its slot is replaced.

        Its trial counts a lost worker (``max_failures``), begun or not; a move
        when the slot said its worker was leaving.
        """
        engine = self.engine
        with engine.lock:
            held = dict(line.held)
            line.held.clear()
            for trial in held:
                if self.where.get(trial) is line:
                    del self.where[trial]
            failures = {t: engine.states[t].failures + 1 for t in held}
        self._retire(line)
        if self.closed:
            return
        for trial, execution in held.items():
            why = (
                f"its worker {line.worker} was lost ({failures[trial]} time(s), "
                f"max_failures={engine.max_failures})"
            )
            if line.leaving:
                outcome = {"status": "moved", "error": f"its worker {line.worker} left"}
            else:
                outcome = {"status": "lost", "error": why}
            engine.finished(trial, execution, outcome)

    def _retire(self, line: Line) -> None:
        """Forget ``line``'s slot and cancel its task (Dask would run it again elsewhere).

        A slot whose worker left gracefully keeps its task: Dask runs it again on
        another worker, or on the first that joins (a restarted one), whose slot then
        takes the number's place at once.
        """
        with self.engine.lock:
            future = None
            # Dask may have run the slot's task again elsewhere (its worker retired), and
            # that run's line may already serve the number: it keeps its place and task
            if self.lines.get(line.number, line) is line:
                self.lines.pop(line.number, None)
                if not line.leaving:
                    future = self.tasks.pop(line.number, None)
            self._threads.forget()  # count the threads afresh: a new slot waits for a free one
        if future is not None and not self.closed:
            cancel_futures(self.client, [future])
        self.engine.wake()

    # -- the engine's hooks ---------------------------------------------------------------------

    def stop(self, state) -> None:
        self.engine.inbox.put(("stop", state.id))  # sent from the loop: not under the lock

    def handle(self, item) -> None:
        if item[0] == "stop":
            line = self.where.get(item[1])
            if line is not None:
                line.stop(item[1])

    def close(self) -> None:
        """Tell every slot bye, wait (a little) for each to end; shut the lines of the others.

        A slot still in the user's code (a trial that does not report) ends
        at its next report, when it finds its line shut.
        """
        with self.engine.lock:
            self.closed = True
            lines = list(self.lines.values())
        for line in lines:
            line.send(("bye",))
        deadline = time.monotonic() + self.END_WAIT
        if self.listener is not None:
            self.listener.close()
            self.listener.join(max(0.0, deadline - time.monotonic()))  # lines end as slots do
        for line in lines:
            line.shut()
        for future in list(self.futures):  # the tasks return once their lines are closed
            with contextlib.suppress(Exception):
                future.result(timeout=max(0.1, deadline - time.monotonic()))
        cancel_futures(self.client, [f for f in self.futures if not f.done()])
        self.futures.clear()
        self.tasks.clear()
        super().close()
