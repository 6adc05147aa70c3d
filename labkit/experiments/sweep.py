"""``lk.sweep``: many trials of one function on the cluster, stopped early, kept in a store.

Every argument is checked before anything runs (each bad one a labkit error
naming it; :mod:`.arguments` declares them); then the sweep opens its store,
finds what a resumed sweep already did (:mod:`.opening`), and runs the rest
as a :class:`~labkit.Run` (``wait=False``) or here (``wait=True``).  See
:mod:`labkit.experiments` for the whole picture.
"""

from __future__ import annotations

from typing import Any

from ..errors import CancelledError, InputError
from ..runs import RunScope, start
from .arguments import DEFAULT_STORE, SWEEP_CONSTRAINTS, SweepConfig, takes
from .job import SweepJob
from .live import LiveSweep, StoredSweep, finished_run, live_sweep
from .search.space import Space
from .spec import SweepSpec
from .sweep_result import Again, SweepResult
from .trials.state import TrialState

__all__ = [
    "sweep",
    "LiveSweep",
    "StoredSweep",
    "live_sweep",
    "finished_run",
    "extend_stored",
    "new_states",
    "DEFAULT_STORE",
    "SWEEP_CONSTRAINTS",
]


@takes(SweepConfig)
def sweep(config: SweepConfig) -> Any:
    """Run ``fn(config, trial)`` for many configurations of ``space`` in parallel; compare them.

    ``fn`` trains with ``config``, calls ``trial.report(step, **metrics)`` (which raises
    ``lk.TrialStopped`` once the sweep stopped it), ``trial.checkpoint(obj)`` and
    ``trial.restore()``; it returns final metrics (a dict), the metric's value, or None (the
    last report's metrics count).  Wrap a pure-Python ``fn`` as ``lk.FunctionCallable(fn,
    holds_gil=True)``: beside an in-process cluster it then runs in processes.

    * ``space``: a dict of parameters to ``lk.loguniform``, ``lk.uniform``, ``lk.randint``,
      ``lk.choice`` or constants; ``lk.grid(...)``; or a list of configurations.
    * ``trials``: how many (every point of a grid or list by default); more on a resume.
    * ``metric``: the reported (or returned) metric that ranks trials; a trial's first report
      must hold it.  ``mode``: ``"min"`` or ``"max"``, whether lower or higher is better.
      Several objectives: a tuple of 2 to 4 names and a tuple of as many modes
      (``metric=("loss", "latency_ms"), mode=("min", "min")``); every trial reports (or
      returns) each, ``record.objectives`` keeps their final values, ``result.pareto`` lists
      the non-dominated trials and ``result.best`` refuses (no single trial is best).
    * ``constraints``: ``fn(final metrics) -> sequence of floats``, each <= 0 when satisfied
      (Optuna's ``constraints_func``); ``record.constraints`` keeps them, an infeasible trial
      is never on the front nor the best, and a sampler built with
      ``constraints_func=labkit.experiments.stored_constraints`` is told them.
    * ``scheduler``: where trials run (one at a time here when None); a trial is one long task
      taking ``workers_per_trial`` of the cluster's threads (room for a trial that is parallel
      itself); the sweep keeps every slot busy, ``max_concurrent`` trials at most.
    * ``seed``: the same seed draws the same configurations (one is drawn and stored otherwise).
    * ``early_stop``: ``lk.ASHA``, ``lk.Median`` or a rule (:mod:`~labkit.experiments.search.rules`),
      deciding on the client from the reports; the sweep works on a copy of it.
    * ``store``: the SQLite file everything is kept in; None keeps the sweep in memory only.
    * ``name``: the sweep's name in the store (``<fn>-<date>-<time>`` by default); one sweep at
      a time, in any thread or process, owns a name.
    * ``resume``: go on with the stored sweep ``name``: trials that ended do not run again,
      interrupted ones go on from their last checkpoint, new ones (more ``trials``) run.
    * ``wait``: False returns a :class:`~labkit.Run` at once; ``run.sweep`` is the live sweep
      (``snapshot()``, ``stop(trial)``, ``add(n)``).
    * ``max_failures``: workers a trial may lose (it restarts from its checkpoint) before it fails.
    * ``search``: ``"random"`` (drawn from ``seed``) or an Optuna sampler (``TPESampler(seed=0)``,
      ``GPSampler``...) asked each configuration as a trial starts (:mod:`~labkit.experiments.search`).
    * ``checkpoints``: where trials write ``trial.checkpoint(obj)`` from their own process (a
      folder or an fsspec URL such as ``"s3://bucket/sweeps"``; ``<store>-checkpoints`` beside the
      store by default, a temporary folder removed at the end with ``store=None``); only a
      reference reaches the client.  ``storage_options``: fsspec's options for it, passed to
      every worker.  ``keep_best``: once trials end, keep the last checkpoint of the
      ``keep_best`` best trials only (None: every trial's latest).  ``result.best.checkpoint()``
      loads the best model back.

    Returns a :class:`~labkit.experiments.SweepResult` (``best``, ``trials``, ``table()``,
    ``extend(n)``) or a Run; a labkit error when no trial completed and some failed.
    """
    __tracebackhide__ = True
    return _run(config)


def _run(config: SweepConfig) -> Any:
    """:func:`sweep` of a config made and checked: its result, or its Run (``wait=False``)."""
    __tracebackhide__ = True
    job = SweepJob(config, _again)
    detail = {"name": job.spec.name}  # what views call the run
    if config.wait:
        return start("sweep", [job.scheduler], _held(job), wait=True, detail=detail)
    run = start("sweep", [job.scheduler], _held(job), wait=False, detail=detail)
    run.sweep = job.live
    return run


def _held(job: SweepJob) -> Any:
    """``job`` as a run's job whose scheduler holds the sweep by the run's id (a dashboard
    opened later finds it there), and whose sweep knows how its run ended."""

    def run(scope: RunScope) -> Any:
        job.live.running(scope.id)
        job.scheduler.hold_run(scope.id, job.live)  # before any trial: views miss nothing
        try:
            result = job(scope)
        except BaseException as err:
            cancelled = isinstance(err, CancelledError) or scope.control.cancelled
            job.live.ended("cancelled" if cancelled else "failed")
            raise
        job.live.ended("finished")
        return result

    return run


def _again(config: SweepConfig, spec: SweepSpec, scheduler: Any) -> Again:
    """How ``result.extend`` runs more trials of this sweep in this kernel: the same config again."""

    def again(total: int, fn: Any, other_scheduler: Any, space: Any, options: dict) -> SweepResult:
        if config.store is None:
            raise InputError(
                "a sweep kept in memory cannot be extended: give store= a path", argument="store"
            )
        if other_scheduler is None:
            other_scheduler = None if scheduler.closed else scheduler
        changes: dict[str, Any] = dict(
            trials=total, seed=spec.seed, name=spec.name, resume=True, scheduler=other_scheduler
        )
        changes.update(wait=True, **options)
        if fn is not None:
            changes["fn"] = fn
        if space is not None:
            changes["space"] = space
        return _run(config.changed(**changes))

    return again


def new_states(spec: SweepSpec, first: int, n: int) -> list[TrialState]:
    """Trials ``first .. first + n - 1`` of ``spec``, pending, as the engine holds them."""
    return [TrialState(record) for record in spec.new_records(first, n)]


def extend_stored(path: str | None, row: dict, space: dict) -> Again:
    """How ``result.extend(n, fn)`` runs more trials of a sweep read back from ``path``."""

    def again(total: int, fn: Any, scheduler: Any, given: Any, options: dict) -> SweepResult:
        if fn is None:
            raise InputError(
                "this sweep was read back from its store: give the trial "
                "function, result.extend(n, fn, scheduler=...)",
                argument="fn",
            )
        if path is None:
            raise InputError(
                "the sweep kept its store in memory; extend it in the kernel that ran it",
                argument="store",
            )
        return sweep(
            fn,
            given if given is not None else Space.from_description(space),
            trials=total,
            metric=_declared(row, 0),
            mode=_declared(row, 1),
            scheduler=scheduler,
            seed=row["seed"],
            store=path,
            name=row["name"],
            resume=True,
            **options,
        )

    return again


def _declared(row: dict, which: int) -> Any:
    """The stored sweep's ``metric`` (``which`` 0) or ``mode`` (1): a str, or a tuple of several."""
    said = tuple(pair[which] for pair in row["objectives"])
    return said[0] if len(said) == 1 else said
