"""The trial a sweep hands to ``fn(config, trial)``: report, checkpoint, restore.

A :class:`Trial` runs wherever its task landed: a thread of the client
process, a Dask worker process, or a process of an offload pool.  What it
reports and checkpoints goes to the sweep on the client through a *sink*
(:mod:`.sinks`): directly in-process, over its slot's socket from a worker
process of this machine (:mod:`.slot`), through Dask's event stream from a
worker elsewhere, through a socket from an offload process.  The sweep decides from the
reports whether the trial goes on; when it stops the trial, the trial's next
:meth:`Trial.report` raises :class:`TrialStopped`, which ends ``fn`` (let it
propagate; the sweep records the trial as stopped).

Examples
--------
>>> from labkit.experiments.launch.sinks import MemorySink
>>> trial = Trial(3, {"lr": 0.1}, MemorySink())
>>> trial.report(0, loss=1.5)
>>> ref = trial.checkpoint({"epoch": 0})     # written to trial.location; a reference kept
>>> trial.restore()["epoch"], trial.id, trial.config["lr"]
(0, 3, 0.1)
>>> trial.report("one", loss=1.0)
Traceback (most recent call last):
...
labkit.errors.InputError: trial.report(step, ...) needs a number as the step, got str 'one' [argument step]
"""

from __future__ import annotations

import math
import numbers
import time
from typing import Any

from ...checkpoints.location import Checkpointable, CheckpointLocation, CheckpointRef
from ...errors import InputError, LabkitError
from ..store.checkpoints import decode, encode_into
from .checkpoint_place import CheckpointPlace, as_ref, scratch_place

__all__ = ["Trial", "TrialStopped"]


class TrialStopped(LabkitError):
    """Raised by ``trial.report`` once the sweep stopped the trial (early stopping, by hand, a cancel).

    Let it end the trial function: the sweep records the trial as stopped,
    with its reports so far.
    """


class Trial:
    """One configuration being tried: ``report``, ``checkpoint``, ``restore``.

    Attributes
    ----------
    id : int
        The trial's number in its sweep (0, 1, ...).
    config : dict
        Its configuration.
    attempt : int
        0 the first time; more after a restart (a lost worker, a resumed sweep).
    metric : str, tuple of str or None
        The sweep's metric (its objectives, when several): the trial's first
        report must hold it (a typo in a name then fails the trial at once,
        not after all its epochs).
    workers : tuple of str
        The addresses of the workers the trial holds: its group of
        ``workers_per_trial`` worker processes, the workers of an in-process
        cluster; empty where it runs in a slot on one worker or in this thread.
    """

    def __init__(
        self,
        id: int,
        config: dict,
        sink,
        attempt: int = 0,
        metric: str | tuple | None = None,
        workers: tuple = (),
        scheduler=None,
        place: CheckpointPlace | None = None,
    ):
        self.id, self.config, self.attempt, self.metric = id, config, attempt, metric
        self.workers = tuple(workers)
        self._sink = sink
        self._scheduler = scheduler
        self._step = None
        self._place = place
        self._written = 0  # checkpoints this execution wrote (a part of their keys)

    def use(self, place: CheckpointPlace) -> None:
        """Write checkpoints to ``place`` (the sweep's; the trial function tells it on arrival)."""
        self._place = place

    @property
    def location(self) -> CheckpointLocation:
        """The sweep's checkpoint location (a folder or fsspec URL) this trial writes to."""
        return self._where().location

    def _where(self) -> CheckpointPlace:
        """The sweep's place, or a temporary folder for a trial made by hand."""
        if self._place is None:
            self._place = scratch_place()
        return self._place

    @property
    def scheduler(self):
        """The labkit scheduler of the trial's own workers: a trainer on it trains there.

        On worker processes with ``workers_per_trial=k`` (k >= 2), a scheduler over
        the trial's k workers alone (one rank each for a ``DataParallelTrainer``),
        shut down when the trial ends.  On an in-process cluster, the sweep's own
        scheduler: its tasks share the cluster's threads with the other trials
        (``workers_per_trial`` leaves threads free for them).  With the
        ``LocalScheduler``, that one.
        """
        if self._scheduler is None:
            raise InputError(
                f"trial {self.id} has no scheduler of its own: it runs in a slot on one "
                "worker process; give lk.sweep workers_per_trial >= 2 for trials that "
                "train across workers (trial.scheduler)",
                argument="workers_per_trial",
            )
        return self._scheduler

    def report(self, step, **metrics) -> None:
        """Report ``metrics`` (numbers) at ``step``; raises :class:`TrialStopped` once stopped.

        Steps are numbers in any unit (epochs, batches), each greater than the
        last: a step not after the previous report's is an
        :class:`~labkit.errors.InputError` naming both (every search keeps
        one report a step, in order; none is dropped unseen).  Reports
        travel to the client asynchronously, gathered and rate-limited; this
        call does not wait for them.
        """
        step = _step(step)
        values = {name: _metric(name, value) for name, value in metrics.items()}
        if self._step is None and self.metric is not None:
            _check_first(self.id, self.metric, step, values)
        if self._step is not None and not step > self._step:
            raise InputError(_step_not_after(self.id, self._step, step), argument="step")
        self._step = step
        if self._sink.report(step, values, time.time()):
            raise TrialStopped(f"trial {self.id} was stopped by the sweep", step=step)

    def checkpoint(self, obj) -> CheckpointRef:
        """Keep ``obj`` as this trial's latest checkpoint (numbers, lists, dicts, numpy, torch).

        ``obj`` is encoded at once in labkit's safe format (loading it back runs
        no code), so changing it afterwards changes nothing kept, and written
        from this process straight to the sweep's location (:attr:`location`):
        only its reference (key, step, size, digest) goes to the sweep.  An
        object that writes its own state (a :class:`~labkit.checkpoints.Checkpointable`,
        e.g. a ``DataParallelTrainer`` from its rank on the workers) is asked to
        with ``obj.write_checkpoint(location, key, step)``.  Returns the reference.
        """
        place = self._where()
        self._written += 1
        key = place.key(self.id, self.attempt, self._written, self._step)
        if isinstance(obj, Checkpointable):
            ref = obj.write_checkpoint(place.location, key, self._step)
        else:
            # encoded straight into the file: no whole copy of a big state in memory
            who = f"trial {self.id}"
            ref = place.location.write_with(
                key, lambda fh: encode_into(obj, fh, who), step=self._step, zipped=True
            )
        self._sink.checkpoint(self._step, ref)
        return ref

    def restore(self, into: Any = None) -> Any:
        """The last checkpoint after a restart (a lost worker, a resumed sweep), else ``None``.

        Read from the sweep's location by this process.  With ``into`` (a
        :class:`~labkit.checkpoints.Checkpointable`, e.g. the trial's trainer),
        the state is loaded into it (``into.read_checkpoint(location, ref)``) and
        True returned (``None`` when there is no checkpoint).
        """
        ref = as_ref(self._sink.restore())
        if ref is None:
            return None
        location = self._where().location
        if into is not None:
            if not isinstance(into, Checkpointable):
                raise InputError(
                    f"trial.restore(into=...) needs an object with write_checkpoint and "
                    f"read_checkpoint (a labkit Checkpointable), got {type(into).__name__}",
                    argument="into",
                )
            into.read_checkpoint(location, ref)
            return True
        return decode(location.read(ref), f"<checkpoint of trial {self.id}>")

    @property
    def should_stop(self) -> bool:
        """Whether the sweep asked this trial to stop (for loops that report rarely)."""
        return self._sink.stopped()

    def __repr__(self):
        return f"<labkit Trial {self.id} {self.config}>"


def _check_first(trial: int, metric: str | tuple, step, values: dict) -> None:
    """The first report holds the metric (every objective of several); an InputError if not."""
    for name in (metric,) if isinstance(metric, str) else metric:
        if name not in values:
            raise InputError(_missing_metric(trial, name, step, values), argument="metric")


def _missing_metric(trial: int, metric: str, step, values: dict) -> str:
    """Why a first report without the sweep's metric fails the trial, naming both."""
    import difflib

    names = ", ".join(map(repr, values)) or "no metrics"
    close = difflib.get_close_matches(metric, list(values), n=1, cutoff=0.5)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return (
        f"trial {trial}: the sweep ranks trials by the metric {metric!r}, but the "
        f"trial's first report (step {step}) holds {names}{hint}; report it with "
        f"trial.report(step, {metric}=...), or give lk.sweep the metric the trial reports"
    )


def _step_not_after(trial: int, last, step) -> str:
    """Why a report at a step not after the last one fails the trial, naming both steps."""
    return (
        f"trial {trial}: trial.report at step {step} after a report at step {last}: each "
        "report's step must be greater than the last (a step is reported once, in order); "
        "count steps on across epochs, e.g. the batches seen so far"
    )


def _step(step):
    if isinstance(step, bool) or not isinstance(step, numbers.Real):
        raise InputError(
            f"trial.report(step, ...) needs a number as the step, got "
            f"{type(step).__name__} {step!r:.40}",
            argument="step",
        )
    if isinstance(step, numbers.Integral):
        return int(step)
    step = float(step)
    if not math.isfinite(step):
        raise InputError(
            f"trial.report(step, ...) needs a finite step, got {step}", argument="step"
        )
    return step


def _metric(name: str, value) -> float:
    """A metric as a float (numpy and torch scalars too), else an InputError naming it."""
    try:
        if isinstance(value, (str, bytes, bool)):
            raise TypeError
        return float(value)
    except (TypeError, ValueError, RuntimeError):
        raise InputError(
            f"trial.report: metric {name!r} must be a number, got "
            f"{type(value).__name__} {value!r:.40}",
            argument=name,
        ) from None
