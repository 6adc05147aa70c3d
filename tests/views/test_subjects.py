"""What a view follows, declared (labkit.views.trackers.subjects): who honours each protocol, and the
Dask client behind a source read through public members only."""

from __future__ import annotations

import numpy as np
import pytest

import labkit as lk
from labkit.experiments.sweep import finished_run
from labkit.views.notebook.board import Board, board
from labkit.views.trackers.subjects import Subject, SweepRun, check_source, client_of
from labkit.views.sweep.board import SweepBoard
from tests.experiments import functions as F

pytestmark = pytest.mark.usefixtures("no_thread_leak")


def _flow_run(scheduler):
    flow = lk.ParallelFlow([lk.nodes.PCA(output_dim=1)])
    return flow.train([[np.eye(3) + 1]], scheduler=scheduler, wait=False)


def test_schedulers_and_runs_are_subjects_and_anything_else_is_refused(local_scheduler):
    run = _flow_run(local_scheduler)
    run.result()
    for source in (local_scheduler, run):
        assert isinstance(source, Subject)
        check_source(source, "lk.board")               # no error
    for bad in (5, "tcp://127.0.0.1:8786", None, object()):
        assert not isinstance(bad, Subject)
        with pytest.raises(lk.InputError, match="lk.board follows a scheduler"):
            check_source(bad, "lk.board")


def test_both_kinds_of_sweep_run_declare_the_sweep_board_and_nothing_else_does(
        comms, local_scheduler):
    """A live sweep's run and a stored sweep's run honour SweepRun; a flow's run does not."""
    space = {"q": lk.uniform(0.5, 1.0), "pause": 0.0, "steps": 2}
    live = lk.sweep(F.curve, space, trials=2, metric="acc", mode="max",
                    scheduler=local_scheduler, seed=1, store=None, wait=False)
    result = live.result()
    stored = finished_run(result)
    flow_run = _flow_run(local_scheduler)
    flow_run.result()
    assert isinstance(live, SweepRun) and isinstance(stored, SweepRun)
    assert not isinstance(flow_run, SweepRun) and not isinstance(local_scheduler, SweepRun)
    boards = [board(live), board(result), board(flow_run, bokeh=False, lanes=False)]
    try:
        assert [type(b) for b in boards] == [SweepBoard, SweepBoard, Board]
    finally:
        for b in boards:
            b.close()


class _Scheduler:
    def __init__(self, client):
        self.client = client


class _Run:
    def __init__(self, *schedulers):
        self.schedulers = list(schedulers)


def test_client_of_reads_the_public_client_of_a_scheduler_a_trainer_or_a_runs_schedulers():
    here, there = object(), object()
    assert client_of(_Scheduler(here)) is here                 # a scheduler's, a trainer's
    assert client_of(_Run(_Scheduler(None), _Scheduler(there))) is there  # a run's schedulers'
    assert client_of(_Scheduler(None), _Run(_Scheduler(there))) is there  # the first that has one
    assert client_of(_Scheduler(None), object()) is None       # threads only: no client
    assert client_of() is None


def test_a_dask_scheduler_and_its_run_give_the_same_client(dask_scheduler):
    run = _flow_run(dask_scheduler)
    run.result()
    assert client_of(dask_scheduler) is dask_scheduler.client is not None
    assert client_of(run) is dask_scheduler.client
