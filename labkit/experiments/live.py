"""A sweep as views and controls see it: live (running) or stored (ended), and its result.

:class:`LiveSweep` is ``run.sweep`` of a sweep started with ``wait=False``:
``snapshot()``, ``stop(trial)``, ``add(n)``, ``result()``.
:class:`StoredSweep` shows a result the same way (a board of a stored
sweep).  Views find a run's sweep through the run (``run.sweep``), or, seeing
only a run's id in events (the dashboard), through the scheduler it ran on:
a sweep registers its run there when it starts (``scheduler.runs()``), and
:func:`live_sweep` looks it up.
"""

from __future__ import annotations

import time
from typing import Any, Protocol, runtime_checkable

from ..constraints import check_argument
from ..errors import InputError
from ..events import Observable, SweepStarted
from ..runs import start
from .arguments import count
from .checkpointing import with_saved
from .engine import SweepEngine
from .search import study_of
from .spec import SweepSpec
from .sweep_result import Again, SweepResult

__all__ = [
    "SweepSource",
    "LiveSweep",
    "StoredSweep",
    "StoredFeed",
    "finished_run",
    "live_sweep",
    "result_of",
]


@runtime_checkable
class SweepSource(Protocol):
    """What a view reads of a sweep, running or ended (``run.sweep``)."""

    name: str
    metric: str
    mode: str
    space: dict
    rule: str | None

    def snapshot(self, history: bool = False) -> list[dict]:
        """Every trial as a plain row (``TrialRecord.row``), in id order."""
        ...

    def stop(self, trial: int) -> bool:
        """Stop one trial; whether it was running."""
        ...

    def add(self, n: int) -> list[int]:
        """Add ``n`` trials; their ids."""
        ...

    def result(self) -> SweepResult:
        """The sweep so far (or as it ended), as a result."""
        ...


def result_of(engine: SweepEngine, again: Again | None = None) -> SweepResult:
    """The sweep's result from its engine's records (what the store holds too)."""
    spec = engine.sweep
    result = SweepResult(
        spec.name,
        spec.metric,
        spec.mode,
        spec.seed,
        spec.space.describe(),
        engine.records(),
        engine.store.path,
        spec.rule_words(),
        again,
        exploits=engine.decisions.exploits,
        study=study_of(spec.search),
        workers=engine.namer.names,  # filled in as they are learned (the last as the store closes)
        objectives=spec.objectives,
        modes=spec.modes,
    )
    location = None if spec.checkpoints is None else spec.checkpoints.location
    if location is None:
        return result
    return with_saved(result, engine.store.path, location.url, location.storage_options)


class LiveSweep:
    """A running sweep, for views and controls: ``snapshot()``, ``stop(trial)``, ``add(n)``.

    ``run.sweep`` of a sweep started with ``wait=False``; its scheduler holds
    it by its run's id while the scheduler lives (:func:`live_sweep`).
    ``run_id``, ``started`` and ``status`` (``running``, then ``finished``,
    ``failed`` or ``cancelled``) say where its run is, for a view that knows
    only the sweep.
    """

    def __init__(self, engine: SweepEngine, spec: SweepSpec):
        self._engine = engine
        self.name, self.metric, self.mode = spec.name, spec.metric, spec.mode
        self.objectives, self.modes = spec.objectives, spec.modes  # several: a Pareto front
        self.space = spec.space.describe()
        self.rule = spec.rule_words()
        self.run_id: str | None = None
        self.started: float | None = None
        self.status = "pending"

    def running(self, run_id: str) -> None:
        """The sweep runs now, as the run ``run_id``."""
        if self.run_id != run_id:
            self.run_id, self.started, self.status = run_id, time.time(), "running"

    def ended(self, status: str) -> None:
        """The sweep's run ended: ``finished``, ``failed`` or ``cancelled``."""
        self.status = status

    def snapshot(self, history: bool = False) -> list[dict]:
        """Every trial as a plain row (``history``: with its reports), in id order."""
        return self._engine.snapshot(history)

    def stop(self, trial: int) -> bool:
        """Stop one trial (its next report raises TrialStopped); False if it had ended."""
        return self._engine.stop_trial(trial)

    def add(self, n: int) -> list[int]:
        """Add ``n`` trials to the running sweep; their ids."""
        check_argument("n", n, [count(1)], "add")
        return self._engine.add_trials(n)

    def result(self) -> SweepResult:
        """The sweep so far, as a result."""
        return result_of(self._engine)

    @property
    def study(self) -> Any:
        """The Optuna study mirroring the sweep when a sampler drives it, else None.

        Read it (``study.trials``, ``study.best_params``...); asking or telling
        it is the sweep's business: a trial asked or told by hand would be one
        the sweep never ran.
        """
        return study_of(self._engine.sweep.search)

    @property
    def exploits(self) -> list:
        """Population-based training's exploits so far (:class:`~.exploits.ExploitRecord`)."""
        return self._engine.decisions.exploits


class StoredSweep:
    """A sweep that has ended, as :class:`LiveSweep` shows one (a board of a stored result).

    It only reads: ``stop`` stops nothing, ``add`` refuses (``result.extend`` runs more).
    """

    def __init__(self, result: SweepResult):
        self._result = result
        self.name, self.metric, self.mode = result.name, result.metric, result.mode
        self.objectives, self.modes = result.objectives, result.modes
        self.space, self.rule = dict(result.space), result.rule
        self.run_id: str | None = None
        self.started: float | None = None
        self.status = "finished"

    def snapshot(self, history: bool = False) -> list[dict]:
        """Every trial as a plain row (``history``: with its reports), in id order."""
        return [t.row(history) for t in sorted(self._result.trials, key=lambda t: t.id)]

    def stop(self, trial: int) -> bool:
        """Nothing runs: False."""
        return False

    def add(self, n: int) -> list[int]:
        """A stored sweep runs nothing here: an InputError saying how to run more."""
        raise InputError(
            "this sweep has ended; run more trials with result.extend(n, fn)", argument="n"
        )

    def result(self) -> SweepResult:
        """The result shown."""
        return self._result


class StoredFeed(Observable):
    """The events of a stored sweep's run; ``worker_identities``: the workers it kept
    (``{address: {"name", "nthreads"}}``), so its board names them as the live one did."""

    def __init__(self, workers: dict):
        self.worker_identities = dict(workers)


def finished_run(result: SweepResult) -> Any:
    """A finished sweep :class:`~labkit.Run` of ``result`` (for ``lk.board(result)``).

    Its ``run.sweep`` shows the result's trials, with their ids, values and
    histories as stored; nothing runs.
    """
    if not isinstance(result, SweepResult):
        raise InputError(
            f"expected a SweepResult (lk.sweep's or lk.load_sweep's), got {type(result).__name__}",
            argument="result",
        )
    stored = StoredSweep(result)

    def job(scope: Any) -> SweepResult:
        scope.emit(
            SweepStarted(
                scope.id,
                result.name,
                result.metric,
                result.mode,
                dict(result.space),
                tuple(stored.snapshot()),
                0,
                result.rule,
                result.store,
                objectives=tuple(result.objectives),
                modes=tuple(result.modes),
            )
        )
        return result

    # its events (the start, the trials, the end) go through a feed of its own: the run
    # keeps them, so a board shown now replays them and knows the sweep ended
    feed = StoredFeed(result.workers)
    run = start("sweep", [feed], job, wait=False, detail={"name": result.name})
    run.sweep = stored
    run.wait()
    return run


def live_sweep(run: Any, scheduler: Any = None) -> SweepSource | None:
    """The sweep of ``run`` (a sweep's Run), or of the run with id ``run`` on ``scheduler``.

    A view that sees only a run's id (in events) finds its sweep through the
    scheduler the sweep ran on, which holds it until it shuts down; None when
    the scheduler holds no sweep by that id.
    """
    if not isinstance(run, str):
        return getattr(run, "sweep", None)
    if scheduler is None or not callable(getattr(scheduler, "runs", None)):
        raise InputError(
            f"live_sweep({run!r}) needs the scheduler the sweep ran on: "
            f"live_sweep(run_id, scheduler)",
            argument="scheduler",
        )
    held = scheduler.runs().get(run)
    return held if isinstance(held, SweepSource) else None
