"""``lk.sweep``: many trials of one function on the cluster, stopped early, kept in a store.

Every argument is checked before anything runs (each bad one a labkit error
naming it); then the sweep opens its store, finds what a resumed sweep
already did, and runs the rest as a :class:`~labkit.Run` (``wait=False``) or
here (``wait=True``).  See :mod:`labkit.experiments` for the whole picture.
"""

from __future__ import annotations

import time
import uuid
import weakref
from dataclasses import dataclass

from ..constraints import InstanceOf, Interval, Options, Satisfies, check_argument, check_arguments
from ..errors import InputError, TaskError, require_callable
from ..events import SweepStarted
from ..runs import start
from .engine import TERMINAL, SweepEngine, TrialState
from .result import SweepResult, TrialRecord
from .rules import check_rule, own_rule
from .space import Space
from .store import Store

__all__ = [
    "sweep",
    "LiveSweep",
    "StoredSweep",
    "live_sweep",
    "finished_run",
    "new_states",
    "DEFAULT_STORE",
]

#: Where sweeps are kept unless told otherwise (``store=None`` keeps them in memory).
DEFAULT_STORE = "experiments.db"

_LIVE: "weakref.WeakValueDictionary[str, LiveSweep]" = weakref.WeakValueDictionary()


@dataclass
class SweepSpec:
    """What a sweep is: its name, space, seed, metric, mode and settings."""

    name: str
    space: Space
    seed: int
    metric: str
    mode: str
    trials: int
    rule: object = None
    max_failures: int = 3
    workers_per_trial: int = 1
    max_concurrent: int | None = None

    def settings(self) -> dict:
        """The settings stored with the sweep."""
        return {
            "trials": self.trials,
            "early_stop": None if self.rule is None else _describe_rule(self.rule),
            "max_failures": self.max_failures,
            "workers_per_trial": self.workers_per_trial,
            "max_concurrent": self.max_concurrent,
        }


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
    fn, holds_gil = _function(fn)
    checked = _check_arguments(
        space,
        trials,
        metric,
        mode,
        seed,
        early_stop,
        wait,
        resume,
        max_failures,
        max_concurrent,
        workers_per_trial,
        scheduler,
        name,
    )
    space = checked["space"]
    owned = scheduler is None
    if owned:
        from ..scheduling import LocalScheduler

        scheduler = LocalScheduler()
    if hasattr(scheduler, "client") and (not scheduler.in_process or holds_gil):
        _check_pickles(fn)
    the_store = Store(store)
    owner = uuid.uuid4().hex
    try:
        spec, engine = _prepare(
            the_store,
            owner,
            fn,
            space,
            checked,
            name,
            metric,
            mode,
            seed,
            trials,
            checked["rule"],
            resume,
        )
    except BaseException:
        the_store.close()
        if owned:
            scheduler.shutdown()
        raise
    again = _again(fn, spec, store, checked, scheduler, early_stop)

    live = LiveSweep(engine, spec)

    def job(scope):
        from .launch import launcher_for
        from .loop import drive

        _LIVE[scope.id] = live
        try:
            engine.scope = scope
            launcher = launcher_for(
                scheduler, engine, fn, holds_gil, workers_per_trial, max_concurrent
            )
            if scope.sources and any(source.has_subscribers for source in scope.sources):
                scope.emit(
                    SweepStarted(
                        scope.id,
                        spec.name,
                        spec.metric,
                        spec.mode,
                        spec.space.describe(),
                        tuple(engine.snapshot()),
                        launcher.slots(),
                        spec.settings()["early_stop"],
                        the_store.path,
                    )
                )
            drive(engine, launcher, scope)
            result = _result(engine, spec, the_store, again)
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


def _function(fn) -> tuple:
    """``(function, holds_gil)`` from a callable or an ``lk.FunctionCallable``."""
    from ..scheduling import FunctionCallable

    if isinstance(fn, FunctionCallable):
        return fn.fn, bool(fn.holds_gil)
    require_callable(fn, "fn", "lk.sweep")
    return fn, bool(getattr(fn, "holds_gil", False))


def _check_pickles(fn) -> None:
    import cloudpickle

    try:
        cloudpickle.dumps(fn)
    except Exception as exc:  # noqa: BLE001 - pickling fails in many ways
        raise InputError(
            f"the trial function cannot be pickled ({type(exc).__name__}: {exc}), "
            "so it cannot reach the workers",
            argument="fn",
        ) from None


def _count(low: int) -> Interval:
    return Interval(int, low, name=f"an int >= {low}")


def _non_empty_str(value) -> bool:
    return isinstance(value, str) and bool(value)


#: What each argument of :func:`sweep` may be, checked first by
#: :func:`labkit.constraints.check_arguments`; the rules that depend on the
#: space or the store come after, in :func:`_check_arguments`.
SWEEP_CONSTRAINTS = {
    "trials": [_count(1), None],
    "metric": [Satisfies(_non_empty_str, "the name of a reported metric (a str)")],
    "mode": [Options(("min", "max"), "'min' or 'max' (is a lower or higher metric better?)")],
    "seed": [_count(0), None],
    "wait": [Options((True, False), "True or False")],
    "resume": [Options((True, False), "True or False")],
    "max_failures": [_count(0)],
    "max_concurrent": [_count(1), None],
    "workers_per_trial": [_count(1)],
    "scheduler": [
        InstanceOf("labkit.scheduling.Scheduler", "an lk.DaskScheduler or an lk.LocalScheduler"),
        None,
    ],
    "name": [Satisfies(_non_empty_str, "a non-empty str"), None],
}


def _check_arguments(
    space,
    trials,
    metric,
    mode,
    seed,
    early_stop,
    wait,
    resume,
    max_failures,
    max_concurrent,
    workers_per_trial,
    scheduler,
    name,
) -> dict:
    """Every argument checked: the declared rules, then those that depend on the space."""
    check_arguments(
        SWEEP_CONSTRAINTS,
        "lk.sweep",
        trials=trials,
        metric=metric,
        mode=mode,
        seed=seed,
        wait=wait,
        resume=resume,
        max_failures=max_failures,
        max_concurrent=max_concurrent,
        workers_per_trial=workers_per_trial,
        scheduler=scheduler,
        name=name,
    )
    space = Space.of(space)
    if trials is None and space.size is None and not resume:
        raise InputError(
            "trials= is needed for a random space (how many configurations to try)",
            argument="trials",
        )
    if space.kind == "list" and trials is not None and trials > space.size:
        raise InputError(
            f"trials={trials} but the list holds {space.size} configurations", argument="trials"
        )
    space.check_pickles()
    # a copy: the rule's records (ASHA's rungs) belong to this sweep, not to the object given
    rule = own_rule(check_rule(early_stop))
    if scheduler is not None and scheduler.closed:
        raise InputError("the scheduler is shut down", argument="scheduler")
    return {
        "space": space,
        "rule": rule,
        "max_failures": max_failures,
        "max_concurrent": max_concurrent,
        "workers_per_trial": workers_per_trial,
    }


def _prepare(store, owner, fn, space, checked, name, metric, mode, seed, trials, rule, resume):
    """The sweep's spec and engine: a new sweep recorded, or a stored one found and checked.

    The name is claimed first (:meth:`Store.claim`): one sweep at a time owns
    it, and a second one started meanwhile is refused before it writes anything.
    """
    name = (
        name
        or f"{getattr(fn, '__name__', 'sweep')}-{time.strftime('%Y%m%d-%H%M%S')}-"
        f"{uuid.uuid4().hex[:4]}"
    )
    holder = store.claim(name, owner)
    if holder is not None:
        raise InputError(
            f"another sweep named {name!r} is running on the store {store.path or 'memory'} "
            f"right now (process {holder['pid']} on {holder['host']}, since "
            f"{time.strftime('%H:%M:%S', time.localtime(holder['since'] or 0))}); one sweep "
            "at a time owns a name: wait for it to end (then resume=True goes on with "
            "it), or give another name",
            argument="name",
        )
    try:
        return _build(store, fn, space, checked, name, metric, mode, seed, trials, rule, resume)
    except BaseException:
        store.release(name, owner)
        raise


def _build(store, fn, space, checked, name, metric, mode, seed, trials, rule, resume):
    """:func:`_prepare`'s work once the name is this sweep's."""
    row = store.sweep(name)
    if row is not None:
        seed = _check_resumable(row, space, metric, mode, seed, resume, store, name)
    elif seed is None:
        seed = int.from_bytes(uuid.uuid4().bytes[:4], "little")
    known = store.trials(name) if row is not None else []
    total = trials or (row["settings"].get("trials") if row is not None else None) or space.size
    total = max(total, len(known))
    spec = SweepSpec(
        name,
        space,
        seed,
        metric,
        mode,
        total,
        rule,
        checked["max_failures"],
        checked["workers_per_trial"],
        checked["max_concurrent"],
    )
    _check_room(spec, total)
    if row is None:
        store.create_sweep(name, space.key(), metric, mode, seed, spec.settings(), now=False)
    else:
        store.update_sweep(name, spec.settings())
    engine = SweepEngine(spec, store, rule, checked["max_failures"])
    reports = store.reports(name) if known else {}
    for t in known:
        state = TrialState(
            t["id"],
            space.configuration(t["id"], seed),
            t["status"],
            attempts=t["attempts"],
            history=reports.get(t["id"], []),
            metrics=t["metrics"],
            value=t["value"],
            best=t["best"],
            error=t["error"],
            traceback=t["traceback"],
            reason=t["reason"],
            worker=t["worker"],
            started=t["started"],
            ended=t["ended"],
        )
        if state.status not in TERMINAL:
            if state.status != "pending":  # interrupted (running, cancelled): runs again
                store.trial_pending(name, state.id)
            state.status = "pending"
        engine.add(state, run=state.status not in TERMINAL)
    new = new_states(spec, len(known), total - len(known))
    store.add_trials(name, [(s.id, s.config) for s in new])
    for state in new:
        engine.add(state)
    return spec, engine


def _check_resumable(row, space, metric, mode, seed, resume, store, name) -> int:
    """The stored sweep may go on with these arguments; its seed."""
    where = store.path or "memory"
    if not resume:
        raise InputError(
            f"the store {where} holds a sweep named {name!r} already; pass "
            f"resume=True to go on with it, or give another name",
            argument="name",
        )
    if row["space"] != space.key():
        raise InputError(
            f"the sweep {name!r} in {where} was made with another space "
            f"({row['space'][:200]}); give its space again, or another name",
            argument="space",
        )
    for argument, stored, given in (("metric", row["metric"], metric), ("mode", row["mode"], mode)):
        if stored != given:
            raise InputError(
                f"the sweep {name!r} in {where} has {argument}={stored!r}, not {given!r}",
                argument=argument,
            )
    if seed is not None and seed != row["seed"]:
        raise InputError(
            f"the sweep {name!r} in {where} was drawn with seed={row['seed']}, not {seed}",
            argument="seed",
        )
    return row["seed"]


def _check_room(spec: SweepSpec, total: int) -> None:
    if spec.space.kind == "list" and total > spec.space.size:
        raise InputError(
            f"{total} trials, but the list holds {spec.space.size} configurations",
            argument="trials",
        )


def new_states(spec: SweepSpec, first: int, n: int) -> list[TrialState]:
    """Trials ``first .. first + n - 1`` of ``spec``, pending."""
    _check_room(spec, first + n)
    return [TrialState(i, spec.space.configuration(i, spec.seed)) for i in range(first, first + n)]


def _result(engine: SweepEngine, spec: SweepSpec, store: Store, again=None) -> SweepResult:
    """The result from the engine's states (what the store holds too)."""
    with engine.lock:
        records = [
            TrialRecord.of(engine.states[i].row(), list(engine.states[i].history))
            for i in sorted(engine.states)
        ]
    return SweepResult(
        spec.name,
        spec.metric,
        spec.mode,
        spec.seed,
        spec.space.describe(),
        records,
        store.path,
        spec.settings()["early_stop"],
        again,
    )


def _raise_if_all_failed(result: SweepResult) -> None:
    """A sweep none of whose trials completed, and some failed: raise the first failure."""
    counts = result.counts()
    if (
        counts.get("failed")
        and not counts.get("completed")
        and not counts.get("stopped")
        and not counts.get("cancelled")
        and not counts.get("pending")
    ):
        first = result.by_status("failed")[0]
        err = TaskError(
            f"no trial of sweep {result.name!r} completed: {counts['failed']} "
            f"failed; trial {first.id} {first.config}: {first.error}",
            user_traceback=first.traceback or "",
        )
        err.result = result  # the records, for a look at every failure
        raise err


def _again(fn, spec: SweepSpec, store, checked: dict, scheduler, rule):
    """How ``result.extend`` runs more trials of this sweep in this kernel."""

    def again(total, other_scheduler, space, options):
        if store is None:
            raise InputError(
                "a sweep kept in memory cannot be extended: give store= a path", argument="store"
            )
        options = {
            "early_stop": rule,
            "max_failures": checked["max_failures"],
            "max_concurrent": checked["max_concurrent"],
            "workers_per_trial": checked["workers_per_trial"],
            **options,
        }
        return sweep(
            fn,
            space if space is not None else spec.space,
            trials=total,
            metric=spec.metric,
            mode=spec.mode,
            seed=spec.seed,
            store=store,
            name=spec.name,
            resume=True,
            scheduler=other_scheduler
            if other_scheduler is not None
            else (None if scheduler.closed else scheduler),
            **options,
        )

    return again


def _describe_rule(rule) -> str:
    describe = getattr(rule, "describe", None)
    return describe() if callable(describe) else repr(rule)


class LiveSweep:
    """A running sweep, for views and controls: ``snapshot()``, ``stop(trial)``, ``add(n)``.

    ``run.sweep`` of a sweep started with ``wait=False``; :func:`live_sweep`
    finds one by its run's id.
    """

    def __init__(self, engine: SweepEngine, spec: SweepSpec):
        self._engine = engine
        self.name, self.metric, self.mode = spec.name, spec.metric, spec.mode
        self.space = spec.space.describe()
        self.rule = spec.settings()["early_stop"]

    def snapshot(self, history: bool = False) -> list[dict]:
        """Every trial as a plain row (``history``: with its reports), in id order."""
        return self._engine.snapshot(history)

    def stop(self, trial: int) -> bool:
        """Stop one trial (its next report raises TrialStopped); False if it had ended."""
        return self._engine.stop_trial(trial)

    def add(self, n: int) -> list[int]:
        """Add ``n`` trials to the running sweep; their ids."""
        check_argument("n", n, [_count(1)], "add")
        return self._engine.add_trials(n)

    def result(self) -> SweepResult:
        """The sweep so far, as a result."""
        e = self._engine
        return _result(e, e.sweep, e.store)


class StoredSweep:
    """A sweep that has ended, as :class:`LiveSweep` shows one (a board of a stored result).

    It only reads: ``stop`` stops nothing, ``add`` refuses (``result.extend`` runs more).
    """

    def __init__(self, result: SweepResult):
        self._result = result
        self.name, self.metric, self.mode = result.name, result.metric, result.mode
        self.space, self.rule = dict(result.space), result.rule

    def snapshot(self, history: bool = False) -> list[dict]:
        """Every trial as a plain row (``history``: with its reports), in id order."""
        rows = [t.row() for t in sorted(self._result.trials, key=lambda t: t.id)]
        if not history:
            for row in rows:
                row.pop("history")
        return rows

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


def finished_run(result: SweepResult):
    """A finished sweep :class:`~labkit.Run` of ``result`` (for ``lk.board(result)``).

    Its ``run.sweep`` shows the result's trials, with their ids, values and
    histories as stored; nothing runs.
    """
    if not isinstance(result, SweepResult):
        raise InputError(
            f"expected a SweepResult (lk.sweep's or lk.load_sweep's), got {type(result).__name__}",
            argument="result",
        )
    from ..events import Observable

    stored = StoredSweep(result)

    def job(scope):
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
            )
        )
        return result

    # its events (the start, the trials, the end) go through a feed of its own: the run
    # keeps them, so a board shown now replays them and knows the sweep ended
    run = start("sweep", [Observable()], job, wait=False, detail={"name": result.name})
    run.sweep = stored
    run.wait()
    return run


def live_sweep(run_id: str) -> LiveSweep | None:
    """The live sweep of the run ``run_id`` (started with ``wait=False``), if still known."""
    return _LIVE.get(run_id)
