"""``lk.sweep``: many trials of one function on the cluster, stopped early, kept in a store.

Every argument is checked before anything runs (each bad one a labkit error
naming it; :mod:`.arguments` declares them); then the sweep opens its store,
finds what a resumed sweep already did (:mod:`.opening`), and runs the rest
as a :class:`~labkit.Run` (``wait=False``) or here (``wait=True``).  See
:mod:`labkit.experiments` for the whole picture.
"""

from __future__ import annotations

import uuid
from typing import Any

from ..errors import InputError, TaskError
from ..events import SweepStarted
from ..runs import start
from ..scheduling import LocalScheduler
from .arguments import SWEEP_CONSTRAINTS, SweepCall, check_pickles, declared, function_of
from .engine import SweepEngine
from .launch import launcher_for
from .live import LiveSweep, StoredSweep, finished_run, live_sweep, result_of
from .loop import drive
from .opening import open_sweep
from .result import Again, SweepResult
from .space import Space
from .spec import SweepSpec
from .store import Store

__all__ = [
    "sweep",
    "LiveSweep",
    "StoredSweep",
    "live_sweep",
    "finished_run",
    "extend_stored",
    "DEFAULT_STORE",
    "SWEEP_CONSTRAINTS",
]

#: Where sweeps are kept unless told otherwise (``store=None`` keeps them in memory).
DEFAULT_STORE = "experiments.db"


@declared(SWEEP_CONSTRAINTS, "lk.sweep")
def sweep(
    fn,
    space,
    *,
    trials: int | None = None,
    metric: str | None = None,
    mode: str | None = None,
    scheduler=None,
    seed: int | None = None,
    early_stop=None,
    store=DEFAULT_STORE,
    name: str | None = None,
    resume: bool = False,
    wait: bool = True,
    max_failures: int = 3,
    max_concurrent: int | None = None,
    workers_per_trial: int = 1,
):
    """Run ``fn(config, trial)`` for many configurations of ``space`` in parallel; compare them.

    Parameters
    ----------
    fn : callable
        ``fn(config, trial)``: trains with ``config``, calls
        ``trial.report(step, **metrics)`` (raises ``lk.TrialStopped`` once the
        sweep stopped it), ``trial.checkpoint(obj)`` and ``trial.restore()``;
        returns final metrics (a dict), the metric's value, or None (the last
        report's metrics count).  Wrap it as ``lk.FunctionCallable(fn,
        holds_gil=True)`` when it is pure Python: beside an in-process cluster
        (``mode="auto"``) it then runs in processes, not threads.
    space : dict, lk.grid(...) or list of dicts
        Parameters to distributions (``lk.loguniform``, ``lk.uniform``,
        ``lk.randint``, ``lk.choice``) or constants; a grid; or configurations.
    trials : int
        How many trials (every point of a grid or list by default).  Larger on
        a resumed sweep: it is extended.
    metric : str
        The reported (or returned) metric that ranks trials and early stopping
        uses; a trial's first report must hold it (one whose first report does
        not fails there, naming both).
    mode : {"min", "max"}
        Whether lower or higher ``metric`` is better.
    scheduler : Scheduler, optional
        Where trials run; one at a time in this process when None.  A trial
        is one long task and takes ``workers_per_trial`` of the cluster's
        threads; the sweep keeps every slot busy.
    seed : int, optional
        The same seed draws the same configurations (one is drawn and stored otherwise).
    early_stop : lk.ASHA, lk.Median or a rule, optional
        Decides on the client, from the reports, which trials stop early.  The
        sweep works on a copy: a rule's records belong to its sweep.
    store : path or None
        The SQLite file everything is kept in (``"experiments.db"``); None
        keeps the sweep in memory only.
    name : str, optional
        The sweep's name in the store (``<fn>-<date>-<time>`` by default); a
        name already there needs ``resume=True``.  One sweep at a time owns a
        name: another one running it (any thread or process) is an InputError.
    resume : bool
        Go on with the stored sweep ``name``: completed, stopped and failed
        trials are not run again, interrupted ones go on from their last
        checkpoint, new ones (``trials`` larger) run too.
    wait : bool
        False returns a :class:`~labkit.Run` at once (``run.sweep`` is the live
        sweep: ``snapshot()``, ``stop(trial)``, ``add(n)``).
    max_failures : int
        Workers a trial may lose (it restarts elsewhere from its checkpoint) before it fails.
    max_concurrent : int, optional
        Most trials running at once (the cluster's slots by default).
    workers_per_trial : int
        Threads (slots) of the cluster one trial takes: give a trial that is
        parallel itself (a trainer over several devices) the room it needs.

    Returns
    -------
    SweepResult or Run
        ``result.best``, ``result.trials``, ``result.table()``; raised instead:
        a labkit error when no trial completed and some failed.
    """
    __tracebackhide__ = True
    call = SweepCall(locals())
    fn, holds_gil = function_of(fn)
    space, rule = call.checked()
    owned = scheduler is None
    if scheduler is None:
        scheduler = LocalScheduler()
    if hasattr(scheduler, "client") and (not scheduler.in_process or holds_gil):
        check_pickles(fn)
    the_store = Store(store)
    owner = uuid.uuid4().hex
    try:
        spec, engine = open_sweep(the_store, owner, fn, call, space, rule)
    except BaseException:
        the_store.close()
        if owned:
            scheduler.shutdown()
        raise
    live = LiveSweep(engine, spec)
    again = _again(call, spec, scheduler)

    def job(scope: Any) -> SweepResult:
        live.running(scope.id)
        try:
            _run(engine, scheduler, scope, fn, holds_gil, call)
            result = result_of(engine, again)
        finally:
            the_store.release(spec.name, owner)
            the_store.close()  # commits what is queued
            if owned:
                scheduler.shutdown()
        the_store.check()
        _raise_if_all_failed(result)
        return result

    if wait:
        return start("sweep", [scheduler], job, wait=True)
    run = start("sweep", [scheduler], job, wait=False)
    run.sweep = live
    return run


def _run(
    engine: SweepEngine, scheduler: Any, scope: Any, fn: Any, holds_gil: bool, call: SweepCall
) -> None:
    """Run every trial of ``engine`` on ``scheduler`` as the run ``scope``."""
    engine.scope = scope
    launcher = launcher_for(
        scheduler, engine, fn, holds_gil, call.workers_per_trial, call.max_concurrent
    )
    if scope.sources and any(source.has_subscribers for source in scope.sources):
        spec = engine.sweep
        scope.emit(
            SweepStarted(
                scope.id,
                spec.name,
                spec.metric,
                spec.mode,
                spec.space.describe(),
                tuple(engine.snapshot()),
                launcher.slots(),
                spec.rule_words(),
                engine.store.path,
            )
        )
    drive(engine, launcher, scope)


def _raise_if_all_failed(result: SweepResult) -> None:
    """A sweep none of whose trials completed, and some failed: raise the first failure."""
    counts = result.counts()
    others = ("completed", "stopped", "cancelled", "pending")
    if counts.get("failed") and not any(counts.get(status) for status in others):
        first = result.by_status("failed")[0]
        err = TaskError(
            f"no trial of sweep {result.name!r} completed: {counts['failed']} "
            f"failed; trial {first.id} {first.config}: {first.error}",
            user_traceback=first.traceback or "",
        )
        err.result = result  # the records, for a look at every failure
        raise err


def _again(call: SweepCall, spec: SweepSpec, scheduler: Any) -> Again:
    """How ``result.extend`` runs more trials of this sweep in this kernel: the same call again."""

    def again(total: int, fn: Any, other_scheduler: Any, space: Any, options: dict) -> SweepResult:
        if call.store is None:
            raise InputError(
                "a sweep kept in memory cannot be extended: give store= a path", argument="store"
            )
        if other_scheduler is None:
            other_scheduler = None if scheduler.closed else scheduler
        arguments = call.changed(
            trials=total, seed=spec.seed, name=spec.name, resume=True, scheduler=other_scheduler
        )
        arguments.update(wait=True, **options)
        if fn is not None:
            arguments["fn"] = fn
        if space is not None:
            arguments["space"] = space
        return sweep(**arguments)

    return again


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
            metric=row["metric"],
            mode=row["mode"],
            scheduler=scheduler,
            seed=row["seed"],
            store=path,
            name=row["name"],
            resume=True,
            **options,
        )

    return again
