"""A scheduler holds the sweeps started on it, by run id, until it shuts down (no global registry)."""

from __future__ import annotations

import gc
import threading
import weakref

import pytest

import labkit as lk
from labkit.events import TrialReported
from labkit.experiments import live as live_module
from tests.experiments import functions as F

SPACE = {"x": lk.uniform(0, 1)}


def _sweep(scheduler, **kw):
    return lk.sweep(F.quadratic, SPACE, trials=2, metric="loss", mode="min", store=None,
                    scheduler=scheduler, **kw)


@pytest.mark.parametrize("kind", ["local", "threads", "address"])
def test_every_scheduler_kind_holds_its_sweeps_in_start_order_ended_ones_too(kind, request):
    if kind == "local":
        scheduler = lk.LocalScheduler()
    elif kind == "threads":
        scheduler = lk.DaskScheduler(mode="threads", n_workers=1, threads_per_worker=2)
    else:
        scheduler = lk.DaskScheduler(request.getfixturevalue("cluster").scheduler_address)
    with scheduler:
        assert dict(scheduler.runs()) == {}
        first = _sweep(scheduler, wait=False)
        first.result(timeout=120)
        second = _sweep(scheduler, wait=False)
        second.result(timeout=120)
        _sweep(scheduler, wait=True)                     # a waited-for sweep is held too
        held = scheduler.runs()
        ids = list(held)
        assert ids[:2] == [first.id, second.id] and len(ids) == 3
        assert held[first.id] is first.sweep and held[second.id] is second.sweep
        assert [s.status for s in held.values()] == ["finished"] * 3   # ended, still listed
        assert held[first.id].run_id == first.id and held[first.id].started is not None
        assert lk.experiments.live_sweep(second.id, scheduler) is second.sweep
        assert lk.experiments.live_sweep("sweep-none", scheduler) is None
        with pytest.raises(TypeError):
            held["x"] = 1                                # read-only
    assert dict(scheduler.runs()) == {}                  # released at shutdown


def test_a_running_sweep_is_held_while_it_runs_and_says_how_it_ended(local_scheduler):
    reported, seen = threading.Event(), []

    def on_event(event):
        if isinstance(event, TrialReported) and not reported.is_set():
            held = dict(local_scheduler.runs())
            seen.append((held, event.run, held[event.run].status))
            reported.set()

    unsubscribe = local_scheduler.subscribe(on_event)
    try:
        run = lk.sweep(F.slow_steps, {"steps": lk.choice([300])}, trials=1, metric="loss",
                       mode="min", store=None, scheduler=local_scheduler, wait=False)
        assert reported.wait(60)
        run.sweep.stop(0)
        run.result(timeout=60)
    finally:
        unsubscribe()
    held, run_id, status = seen[0]
    assert run_id == run.id and held[run.id] is run.sweep     # held while it reported
    assert status == "running"
    assert local_scheduler.runs()[run.id].status == "finished"


def test_no_module_level_registry_keeps_sweeps_alive():
    assert not hasattr(live_module, "_RUNNING")
    with lk.LocalScheduler() as scheduler:
        run = _sweep(scheduler, wait=False)
        run.result(timeout=60)
        ref = weakref.ref(run.sweep)
    del run
    gc.collect()
    assert ref() is None                                 # the shut-down scheduler let it go


def test_live_sweep_by_id_names_the_scheduler_it_needs():
    with pytest.raises(lk.InputError, match="scheduler"):
        lk.experiments.live_sweep("sweep-1234")
