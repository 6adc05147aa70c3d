"""What runs where trials run: the trial function, on a thread, a worker process or an offload process.

:func:`execute` calls ``fn(config, trial)`` and turns whatever happens into a
plain outcome: ``completed`` (with the final metrics it returned), ``stopped``
(it raised :class:`~.trial.TrialStopped`), or ``failed`` (its error, with the
traceback from the first line of the user's own code).  The rest wires a
trial to its sink:

* :func:`run_remote` is the task of one trial on a Dask worker process;
* :func:`run_offloaded` runs a GIL-holding trial in the scheduler's offload
  pool from a thread of an in-process cluster, serving the trial's socket
  (:class:`OffloadTrial` is what runs in the pool's process).
"""

from __future__ import annotations

import contextlib
import numbers
import os
import signal
import threading
import traceback
from typing import Any

from ...errors import InputError, LabkitError, TaskError, WorkerLostError, exception_text
from ...scheduling import TaskCallable
from ..trials.trial import Trial, TrialStopped
from .channel import deliver
from .listener import Listener
from .sinks import EventSink, PipeSink, forget_stop, new_execution

__all__ = [
    "execute",
    "final_metrics",
    "trial_function",
    "run_remote",
    "OffloadTrial",
    "run_offloaded",
    "CtrlCWatch",
    "watch_ctrl_c",
]

_FUNCTIONS: dict = {}  # on a worker process: sweep token -> its trial function


def execute(fn, trial: Trial) -> dict:
    """``fn(trial.config, trial)`` run to its end; its outcome as plain data.

    ``sys.exit()`` or a ``KeyboardInterrupt`` raised by the trial's own code
    fails that trial like any error (the sweep goes on); only a real Ctrl-C
    of the sweep's own thread (:class:`CtrlCWatch`) stops the sweep.
    """
    try:
        returned = fn(trial.config, trial)
        out = {"status": "completed"}
        out.update(final_metrics(returned))
        return out
    except TrialStopped:
        return {"status": "stopped"}
    except Exception as exc:  # the trial failed; the sweep goes on
        # (its words safely: an exception whose __str__ raises is still the trial's failure)
        return _failed(exc, trial, exception_text(exc))
    except (SystemExit, KeyboardInterrupt) as exc:
        if isinstance(exc, KeyboardInterrupt) and _CTRL_C.is_set():
            raise  # the user pressed Ctrl-C: the sweep winds down
        what = (
            f"called sys.exit({exc.code!r})"
            if isinstance(exc, SystemExit)
            else "raised KeyboardInterrupt"
        )
        return _failed(
            exc,
            trial,
            f"trial {trial.id} {what} in its own code; the trial failed, the sweep goes on",
        )


def _failed(exc: BaseException, trial: Trial, words: str) -> dict:
    """The outcome of a trial that raised ``exc``, its traceback from the user's code."""
    err = TaskError.from_exception(exc, traceback.format_exc(), what=f"trial {trial.id}")
    kind = err.original_type.rsplit(".", 1)[-1]
    return {
        "status": "failed",
        "error": f"{kind}: {words}",
        "traceback": err.user_traceback or err.remote_traceback,
    }


# Set by :class:`CtrlCWatch`'s handler: a KeyboardInterrupt now is the user's Ctrl-C.
_CTRL_C = threading.Event()


class CtrlCWatch:
    """While trials run in the main thread, tell a real Ctrl-C from a trial's own KeyboardInterrupt.

    Started once a sweep (:meth:`start`, :meth:`stop`), not once a trial (a
    handler swapped in and out around each trial was two system calls on
    every trial's path).  The SIGINT handler in place is kept (and called);
    the watch only marks that the interrupt came from outside.  Elsewhere
    than in the main thread, no signal arrives, and it does nothing.
    """

    def __init__(self) -> None:
        self._previous: Any = None
        self.watching = False

    def start(self) -> None:
        """Watch from now on (in the main thread; elsewhere nothing)."""
        if self.watching or threading.current_thread() is not threading.main_thread():
            return
        previous = signal.getsignal(signal.SIGINT)
        if previous is None:  # a handler set outside Python: none could be put back, left alone
            return

        def handler(signum, frame):
            if previous is signal.SIG_IGN:
                return
            _CTRL_C.set()
            if callable(previous):  # Python's or the kernel's own: it raises KeyboardInterrupt
                previous(signum, frame)
                return
            raise KeyboardInterrupt

        try:
            signal.signal(signal.SIGINT, handler)
        except (ValueError, TypeError):  # no signals here (an embedded interpreter)
            return
        self._previous, self.watching = previous, True
        _CTRL_C.clear()

    def next_trial(self) -> None:
        """A trial starts: a Ctrl-C that an earlier trial swallowed counts no more."""
        if _CTRL_C.is_set():
            _CTRL_C.clear()

    def stop(self) -> None:
        """Put the handler found at :meth:`start` back."""
        if not self.watching:
            return
        self.watching = False
        signal.signal(signal.SIGINT, self._previous)
        _CTRL_C.clear()


@contextlib.contextmanager
def watch_ctrl_c():
    """:class:`CtrlCWatch` around a block (trials run in the main thread inside it)."""
    watch = CtrlCWatch()
    watch.start()
    try:
        yield
    finally:
        watch.stop()


def final_metrics(returned) -> dict:
    """What ``fn`` returned as ``{"metrics": {...}}``, ``{"value": x}`` or ``{}`` (None)."""
    if returned is None:
        return {}
    if isinstance(returned, numbers.Real) and not isinstance(returned, bool):
        return {"value": float(returned)}
    if isinstance(returned, dict):
        metrics = {}
        for name, value in returned.items():
            try:
                metrics[str(name)] = float(value)
            except (TypeError, ValueError):
                raise InputError(
                    f"the trial function returned {name!r}: "
                    f"{type(value).__name__}; final metrics must be numbers",
                    argument="fn",
                ) from None
        return {"metrics": metrics}
    raise InputError(
        f"the trial function returned a {type(returned).__name__}; return a dict "
        "of final metrics, a number (the metric's value) or None",
        argument="fn",
    )


# -- a trial on a Dask worker process -------------------------------------------------------


def trial_function(token: str, blob: bytes):
    """The sweep's trial function, unpickled once a worker process (kept by sweep ``token``)."""
    fn = _FUNCTIONS.get(token)
    if fn is None:
        import cloudpickle

        if len(_FUNCTIONS) > 8:  # functions of sweeps that ended
            _FUNCTIONS.clear()
        fn = _FUNCTIONS[token] = cloudpickle.loads(blob)
    return fn


def run_remote(blob: bytes, spec: dict, topic: str) -> dict:
    """The task of one trial on a worker process: run it, streaming to the client on ``topic``."""
    token, trial_id = spec["token"], spec["trial"]
    execution = new_execution()
    sink = EventSink(topic, token, trial_id, execution, spec.get("restore"))
    # Dask runs the same task again when its worker died: each run counts as an attempt
    attempt = spec["attempt"] + sink.runs_before()
    sink.start(attempt)
    try:
        fn = trial_function(token, blob)
    # a function that cannot be unpickled here (a missing module, one that exits on import)
    except (Exception, SystemExit, KeyboardInterrupt) as exc:
        outcome = {
            "status": "failed",
            "error": f"the trial function cannot be loaded on "
            f"{sink.worker.address}: {type(exc).__name__}: {exception_text(exc)}",
            "traceback": traceback.format_exc(),
        }
    else:
        outcome = execute(fn, Trial(trial_id, spec["config"], sink, attempt, spec.get("metric")))
    outcome["exec"] = execution
    sink.end(outcome)
    forget_stop(token, trial_id)
    return outcome


# -- a GIL-holding trial in an offload process ----------------------------------------------


class OffloadTrial(TaskCallable):
    """Runs trials in an offload pool's process, talking to the task's thread over a socket."""

    holds_gil = True

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, spec: dict) -> dict:
        from multiprocessing.connection import Client

        conn = Client(spec["address"], authkey=spec["authkey"])
        try:
            sink = PipeSink(conn)
            sink.start()
            trial = Trial(spec["trial"], spec["config"], sink, sink.attempt, spec.get("metric"))
            outcome = execute(self.fn, trial)
            sink.end(outcome)
        finally:
            conn.close()
        return outcome


def run_offloaded(engine, pool, callable_: OffloadTrial, spec: dict, info, worker: str) -> tuple:
    """Run a trial in ``pool`` from this thread; ``(execution, outcome)``.

    A thread serves the trial's socket meanwhile: each process the pool
    starts for the trial (again, after one died) connects anew, gets the
    latest checkpoint, and is a new execution for the sweep.  (Each
    connection is authenticated on a thread of its own, with a deadline: one
    that never answers holds up neither the trial nor this thread.)
    """
    authkey = os.urandom(16)
    served: dict = {"exec": None}
    listener = Listener(
        authkey,
        lambda conn: _serve(conn, engine, spec["trial"], worker, served),
        f"labkit-trial-{spec['trial']}-socket",
        family="AF_UNIX",
    )
    try:
        outcome = pool.run(
            callable_, dict(spec, address=listener.address, authkey=authkey), info, worker
        ).result
    except WorkerLostError as err:
        outcome = {"status": "lost", "error": err.message}
    except LabkitError as err:
        outcome = {
            "status": "failed",
            "error": str(err),
            "traceback": getattr(err, "remote_traceback", None),
        }
    finally:
        listener.close()
        listener.join()  # the process's line ended with its task
    return served["exec"], outcome


def _serve(conn, engine, trial: int, worker: str, served: dict) -> None:
    """Answer one process of the trial, to its end message (or its death)."""
    try:
        first = conn.recv()
        execution = served["exec"] = new_execution()
        deliver(engine, "start", trial, execution, f"{worker} (process {first[1]})")
        conn.send((engine.restore_blob(trial), engine.attempt(trial)))
        _answer(conn, engine, trial, execution)
    except (EOFError, OSError):  # the process died: the pool starts another
        pass


def _answer(conn, engine, trial: int, execution: str) -> None:
    """The calls of one process, until its end message."""
    while True:
        message = conn.recv()
        kind = message[0]
        if kind == "reports":
            conn.send(deliver(engine, kind, trial, execution, message[1]))
        elif kind == "checkpoint":
            deliver(engine, kind, trial, execution, message[1], message[2])
            conn.send(True)
        elif kind == "stopped":
            conn.send(engine.stop_requested(trial, execution))
        elif kind == "end":
            return
