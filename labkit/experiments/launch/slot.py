"""A slot on a Dask worker process: one long task that runs trial after trial the sweep hands it.

:func:`run_slot` is the task.  It connects back to the sweep's client over a
socket (``multiprocessing.connection``, authenticated with the sweep's key)
and keeps that line for its whole life: the client sends the trial
function once, then one trial at a time (``("trial", spec)``), a trial's
stop (``("stop", id)``) and at last ``("bye",)``; the slot sends back
batches of messages (``start``, ``report``, ``checkpoint``, ``end``), each
naming the trial and its execution.  A trial thus costs no Dask task and
no trip through the scheduler: a message each way on one socket.  (Sending
the next trial ahead, while one runs, measured no faster once both ends
send at once, see :func:`~.slot_line.no_delay`, and would let a short trial
wait behind a long one while another slot idles.)

What the trial reports goes through an outbox that one writer thread
empties: the trial never waits on the socket, and reports that pile up
while a batch is on its way leave together (no timer, so nothing waits for a
next report).  A stop the client sends is read at the trial's next report
(``trial.report`` polls the line, never blocking).  A line that breaks
(the client closed the sweep) stops the running trial at its next report
and ends the slot; the client, for its part, takes a broken line for a lost
worker and runs that trial again elsewhere from its latest checkpoint.
"""

from __future__ import annotations

import os
import queue
import threading
import traceback

from ...errors import exception_text
from ...scheduling.workers.closing import as_in_this_task, on_close
from ..trials.trial import Trial
from .execution import execute, trial_function
from .slot_line import no_delay, shut, shut_reading

__all__ = ["run_slot", "Slot", "SlotSink", "merge_reports"]


def run_slot(address, authkey: bytes, number: int) -> int:
    """The task of slot ``number``: trials from the client at ``address``; how many it ran.

    A slot that cannot reach the client (the sweep ended before it started)
    returns -1 at once.
    """
    from multiprocessing import AuthenticationError
    from multiprocessing.connection import Client

    from distributed import get_worker

    try:
        conn = Client(address, authkey=authkey)
    except (OSError, EOFError, AuthenticationError):
        return -1
    no_delay(conn)
    slot = Slot(conn, number, get_worker().address)
    forget = on_close(slot.worker_closing)  # a closing worker need not wait for the slot
    try:
        return slot.serve()
    finally:
        forget()
        slot.close()


class Slot:
    """One line to the client, the trials it sends, and the writer thread of the outbox."""

    def __init__(self, conn, number: int, worker: str):
        self.conn, self.number, self.worker = conn, number, worker
        self.outbox: queue.SimpleQueue = queue.SimpleQueue()
        self.stops: set = set()  # trials the client stopped (read from the line)
        self.waiting: list = []  # messages read from the line, not yet handled (fn, trials)
        self.gone = False  # the line broke, or the client said bye
        self.closing = threading.Event()  # the worker closes: the slot ends now
        self._running: threading.Event | None = None  # set when the running trial ends
        self._reading = threading.Lock()  # one reader of the line at a time
        self._writer = threading.Thread(
            target=self._write, daemon=True, name=f"labkit-slot-{number}-writer"
        )
        self._writer.start()

    def serve(self) -> int:
        """Say hello, load the trial function, run trials until the client says bye."""
        self.outbox.put(("hello", self.number, self.worker, os.getpid()))
        ran = 0
        first = self._next()
        if first is None or first[0] != "fn":
            return ran
        _, token, blob, metric = first
        try:
            fn, error = trial_function(token, blob), None
        # a function that cannot be unpickled here (a missing module, one that exits on import)
        except (Exception, SystemExit, KeyboardInterrupt) as exc:
            fn = None
            error = {
                "status": "failed",
                "error": f"the trial function cannot be loaded on "
                f"{self.worker}: {type(exc).__name__}: {exception_text(exc)}",
                "traceback": traceback.format_exc(),
            }
        while True:
            message = self._next()
            if message is None or message[0] != "trial":
                return ran
            self.run(message[1], fn, error, metric)
            ran += 1

    def run(self, spec: dict, fn, error: dict | None, metric: str | None) -> None:
        """Run one trial (or fail it at once when the function did not load); send its end."""
        trial_id = spec["trial"]
        sink = SlotSink(self, trial_id, spec["exec"], spec.get("restore"))
        if trial_id in self.stops:  # stopped before it began
            outcome = {"status": "stopped"}
        elif error is not None:
            sink.start()
            outcome = dict(error)
        else:
            sink.start()
            trial = Trial(trial_id, spec["config"], sink, spec["attempt"], metric)
            outcome = self._execute(fn, trial)
        self.stops.discard(trial_id)
        sink.end(outcome)

    def _execute(self, fn, trial: Trial) -> dict:
        """``execute(fn, trial)`` on a thread of its own, which the slot's task thread awaits.

        A closing worker waits for the threads of its pool, not for this one:
        the task returns as soon as the worker closes (:meth:`worker_closing`),
        and a trial still inside a long step of its own code ends with the
        process.  The trial's thread runs as the task's would (the worker's
        context: ``get_worker()`` and ``get_client()`` work there).
        """
        done = self._running = threading.Event()
        box: dict = {}

        def run() -> None:
            try:
                box["outcome"] = execute(fn, trial)
            except BaseException as exc:  # not the trial's failure (execute keeps those)
                box["raised"] = exc
            finally:
                done.set()

        thread = threading.Thread(
            target=as_in_this_task(run),
            daemon=True,
            name=f"labkit-slot-{self.number}-trial-{trial.id}",
        )
        thread.start()
        if self.closing.is_set():  # the worker began to close meanwhile
            done.set()
        done.wait()
        self._running = None
        if "raised" in box:
            raise box["raised"]
        outcome = box.get("outcome")
        if self.closing.is_set() and (
            outcome is None or (outcome["status"] == "stopped" and trial.id not in self.stops)
        ):  # stopped by its worker's leaving, not by the sweep: it goes on elsewhere
            outcome = {"status": "moved", "error": f"its worker {self.worker} left"}
        return outcome or {"status": "lost", "error": f"its worker {self.worker} closed under it"}

    def worker_closing(self) -> None:
        """The worker closes (on its event loop: only signals): the slot leaves now.

        The client is told (``leaving``), and the running trial's end comes as a
        move: the client runs it again elsewhere from its latest checkpoint,
        no failure.  The line stops reading, so that the slot's task ends at
        once; the trial's own thread stops at its next report, or ends with
        the process.
        """
        self.closing.set()
        self.outbox.put(("leaving", self.number, self.worker))
        running = self._running
        if running is not None:
            running.set()
        shut_reading(self.conn)

    def _next(self):
        """The next message for the slot (a trial, the function, bye), waiting; None at the end."""
        while not self.waiting and not self.gone and not self.closing.is_set():
            with self._reading:
                try:
                    self._take(self.conn.recv())
                except (EOFError, OSError):
                    self._broke()
        return self.waiting.pop(0) if self.waiting and not self.closing.is_set() else None

    def _broke(self) -> None:
        """Reading the line failed: the client is gone, unless the slot stopped reading
        (its worker leaves, and it still tells the client so)."""
        if not self.closing.is_set():
            self.gone = True

    def poll(self) -> None:
        """Read what the client sent meanwhile (stops), never waiting."""
        if self.gone or not self._reading.acquire(blocking=False):
            return  # another thread reads the line now
        try:
            while self.conn.poll(0):
                self._take(self.conn.recv())
        except (EOFError, OSError):
            self._broke()
        finally:
            self._reading.release()

    def _take(self, message: tuple) -> None:
        kind = message[0]
        if kind == "stop":
            self.stops.add(message[1])
        elif kind == "bye":
            self.gone = True
        else:
            self.waiting.append(message)

    def _write(self) -> None:
        """Send what the outbox holds, all that piled up in one batch, until it gets None."""
        while True:
            batch = [self.outbox.get()]
            while batch[-1] is not None:
                try:
                    batch.append(self.outbox.get_nowait())
                except queue.Empty:
                    break
            last = batch[-1] is None
            messages = merge_reports([m for m in batch if m is not None])
            if messages and not self.gone:
                try:
                    self.conn.send(messages)
                # the client is gone (or a message would not pickle: the client then sees
                # the line close, as for a lost worker, rather than wait for it forever)
                except Exception:
                    self.gone = True
                    shut(self.conn)
            if last:
                return

    def close(self) -> None:
        """Send what is left, end the writer, close the line."""
        self.outbox.put(None)
        self._writer.join(timeout=10)
        self.conn.close()


def merge_reports(messages: list) -> list:
    """``messages`` with each run of one execution's reports as one ``reports`` message.

    >>> merge_reports([("report", 1, "e", 0, {"x": 1.0}, 5.0), ("report", 1, "e", 1, {}, 6.0),
    ...                ("end", 1, "e", {"status": "completed"})])
    [('reports', 1, 'e', [(0, {'x': 1.0}, 5.0), (1, {}, 6.0)]), ('end', 1, 'e', {'status': 'completed'})]
    """
    out: list = []
    for message in messages:
        if message[0] != "report":
            out.append(message)
            continue
        report = message[3:]
        last = out[-1] if out else None
        if last is not None and last[0] == "reports" and last[1:3] == message[1:3]:
            last[3].append(report)
        else:
            out.append(("reports", message[1], message[2], [report]))
    return out


class SlotSink:
    """Where a trial in a slot reports: the slot's outbox; stops read from its line."""

    def __init__(self, slot: Slot, trial: int, execution: str, restore: bytes | None):
        self.slot, self.trial, self.execution = slot, trial, execution
        self._restore = restore

    def start(self) -> None:
        self.slot.outbox.put(("start", self.trial, self.execution))

    def end(self, outcome: dict) -> None:
        self.slot.outbox.put(("end", self.trial, self.execution, outcome))

    def report(self, step, metrics, t) -> bool:
        self.slot.outbox.put(("report", self.trial, self.execution, step, metrics, t))
        return self.stopped()

    def checkpoint(self, step, blob) -> None:
        self.slot.outbox.put(("checkpoint", self.trial, self.execution, step, blob))

    def restore(self):
        """The latest checkpoint the client sent with the trial (a restart, a resume)."""
        return self._restore

    def stopped(self) -> bool:
        self.slot.poll()
        slot = self.slot
        return self.trial in slot.stops or slot.gone or slot.closing.is_set()
