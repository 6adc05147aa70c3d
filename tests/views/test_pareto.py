"""The board's Pareto view, kernel side: the front kept as trials end, the hypervolume over
time, the ``pareto`` part of the frames (issue 48), checked against a brute-force front, a real
two-objective sweep's ``result.pareto``, and at 10,000 trials by the bytes a kernel sends."""

from __future__ import annotations

import gc
import random
import time

import numpy as np
import pytest

import labkit as lk
from labkit.events import SweepStarted, TrialFinished
from labkit.experiments import TrialRecord
from labkit.experiments.objectives.dominance import hypervolume, pareto_front
from labkit.views.notebook.board import board
from labkit.views.sweep.frames import FrameEncoder
from labkit.views.sweep.pareto import MOST_HV, ParetoFrames, ParetoFront
from labkit.views.trackers.sweep_tracker import SweepTracker
from tests.experiments import objective_functions as OF
from tests.views.frames_page import frames_of, size

XY = {"x": lk.uniform(0, 1), "y": lk.uniform(0, 1)}


def brute_front(points: dict, modes) -> set:
    """Ids of the points no other dominates, by comparing every pair."""
    signs = np.array([1 if m == "min" else -1 for m in modes])
    p = {t: np.asarray(v) * signs for t, v in points.items()}
    return {i for i in p if not any((p[j] <= p[i]).all() and (p[j] < p[i]).any() for j in p)}


@pytest.mark.parametrize("modes", [("min", "min"), ("max", "min"), ("min", "max", "min"),
                                   ("max", "max", "min", "min")])
def test_the_front_kept_trial_by_trial_is_the_brute_force_front(modes):
    rng = random.Random(len(modes))
    front, points = ParetoFront(modes), {}
    for t in range(200):
        values = tuple(float(rng.randint(0, 12)) for _ in modes)  # ties and equal points
        points[t] = values
        before = set(front.ids())
        added, removed = front.add(t, values)
        now = brute_front(points, modes)
        assert set(front.ids()) == now, t
        assert set(added) == now - before and set(removed) == before - now
    if len(modes) == 2:  # a staircase: the first objective rises, the second falls
        keys = front.values() * np.array([1 if m == "min" else -1 for m in modes])
        assert (np.diff(keys[:, 0]) >= 0).all() and (np.diff(keys[:, 1]) <= 0).all()


def rows(points: dict, constraints: dict | None = None):
    return [TrialRecord(id=t, config={}, status="completed", value=v[0], best=v[0], step=1,
                        attempts=1, objectives={"a": v[0], "b": v[1]},
                        constraints=(constraints or {}).get(t)) for t, v in points.items()]


def test_the_hypervolume_over_time_is_against_one_reference_the_default_or_the_given():
    rng = random.Random(3)
    frames = ParetoFrames(("a", "b"), ("min", "max"))
    points = {}
    for t in range(120):
        points[t] = (rng.uniform(0, 10), rng.uniform(-5, 5))
        frames.fold(rows({t: points[t]}))
    paint = frames.paint()
    a, b = np.array(list(points.values())).T
    # the default: the worst seen plus a tenth of the range seen
    assert paint["reference"] == pytest.approx([a.max() + 0.1 * np.ptp(a),
                                                b.min() - 0.1 * np.ptp(b)], rel=1e-5)
    assert set(paint["front"]) == brute_front(points, ("min", "max"))
    # every point of the history is the front of the trials ended by then, against it
    assert paint["hv"] and len(paint["hv"]) <= 2 * MOST_HV
    for n, hv in paint["hv"]:
        prefix = dict(list(points.items())[:n])
        ids = sorted(brute_front(prefix, ("min", "max")))
        exact = hypervolume([prefix[i] for i in ids], ("min", "max"), paint["reference"])
        assert hv == pytest.approx(exact, rel=1e-5)

    given = ParetoFrames(("a", "b"), ("min", "max"), reference=(20, -10))
    given.fold(rows(points))
    assert given.paint()["reference"] == [20, -10] and given.paint()["given"] is True
    with pytest.raises(lk.errors.InputError, match="reference"):
        ParetoFrames(("a", "b"), ("min", "max"), reference=(1, 2, 3))


def test_infeasible_trials_are_shown_never_on_the_front():
    frames = ParetoFrames(("a", "b"), ("min", "min"))
    frames.fold(rows({0: (1.0, 1.0), 1: (2.0, 2.0), 2: (3.0, 0.5)}, constraints={0: (0.5,)}))
    part = frames.delta()
    assert part["points"]["id"] == [0, 1, 2] and part["points"]["infeasible"] == [0]
    assert sorted(part["added"]) == [1, 2] and frames.paint()["front"] == [1, 2]


class FrontPage:
    """The front as a page builds it from frames: a paint's, then each delta's changes."""

    def __init__(self):
        self.front, self.points = set(), {}

    def apply(self, frame: dict) -> None:
        part = frame.get("pareto")
        if part is None:
            return
        if frame["kind"] == "paint":
            self.front, self.points = set(part["front"]), {}
        self.points.update(zip(part.get("points", {}).get("id", []),
                               part.get("points", {}).get("values", []), strict=True))
        self.front = (self.front - set(part.get("removed", []))) | set(part.get("added", []))


@pytest.fixture
def boards():
    made = []
    yield made
    for b in made:
        b.close()


def test_a_two_objective_board_sends_the_front_and_a_single_metric_board_none(
        comms, local_scheduler, boards):
    run = lk.sweep(OF.two_objectives, XY, trials=24, metric=("loss", "latency_ms"),
                   mode=("min", "min"), scheduler=local_scheduler, seed=2, store=None,
                   wait=False)
    b = board(run, reference=(5.0, 12.0))
    boards.append(b)
    result = run.result()
    deadline = time.time() + 20
    while b.live and time.time() < deadline:
        time.sleep(0.02)
    page = FrontPage()
    for frame in frames_of(comms, b.widget):
        page.apply(frame)
    assert page.front == {t.id for t in result.pareto}
    assert sorted(page.points) == sorted(t.id for t in result.trials if t.objectives)
    for t in result.trials:
        assert page.points[t.id] == pytest.approx([t.objectives["loss"],
                                                   t.objectives["latency_ms"]], rel=1e-5)
    last = b.encoder.pareto.paint()
    assert last["reference"] == [5.0, 12.0] and last["names"] == ["loss", "latency_ms"]
    exact = hypervolume([[t.objectives["loss"], t.objectives["latency_ms"]]
                         for t in result.pareto], ("min", "min"), (5.0, 12.0))
    assert last["hv"][-1][1] == pytest.approx(exact, rel=1e-5)

    one = lk.sweep(OF.returns_one, XY, trials=3, metric="loss", mode="min",
                   scheduler=local_scheduler, store=None, wait=False)
    b1 = board(one)
    boards.append(b1)
    one.result()
    deadline = time.time() + 20
    while b1.live and time.time() < deadline:
        time.sleep(0.02)
    assert b1.encoder.pareto is None
    assert all("pareto" not in f for f in frames_of(comms, b1.widget))


def test_ten_thousand_trials_a_front_update_is_small_and_cheap():
    """Frames of 10,000 ended trials (50 a frame): the ``pareto`` part of each delta, as a
    kernel serialises it, is at most 10 KB, and its fold at most 50 ms of CPU time."""
    rng = np.random.default_rng(5)
    tracker = SweepTracker("r")
    trials = tuple({"id": i, "config": {"x": 0.5}} for i in range(10_000))
    tracker(SweepStarted("r", "big", "a", "min", {"x": {"type": "uniform", "lo": 0, "hi": 1}},
                         trials, 2))
    encoder = FrameEncoder(tracker)
    encoder.pareto = ParetoFrames(("a", "b"), ("min", "min"))
    encoder.paint()
    x = rng.uniform(0, 1, 10_000)
    y = 1 - np.sqrt(x) + rng.exponential(0.3, 10_000)   # a front of a few dozen trials
    most_bytes = most_cpu = 0.0
    for start in range(0, 10_000, 50):
        for i in range(start, start + 50):
            tracker(TrialFinished("r", TrialRecord(
                id=i, config={"x": 0.5}, status="completed", value=float(x[i]), best=float(x[i]),
                step=1, attempts=1, objectives={"a": float(x[i]), "b": float(y[i])})))
        state = tracker.state(sorted(tracker.take().trials))
        gc.disable()  # a pass over the whole heap (its 10,000 records) is not the fold's cost
        try:
            cpu = time.thread_time()  # this thread only: a neighbour thread is not counted
            encoder.pareto.fold(state.rows)
            part = encoder.pareto.delta()
            most_cpu = max(most_cpu, time.thread_time() - cpu)
        finally:
            gc.enable()
        most_bytes = max(most_bytes, size({"kind": "delta", "pareto": part}))
    assert most_bytes <= 10_000, most_bytes
    assert most_cpu <= 0.05, most_cpu
    exact = pareto_front(np.column_stack([x, y]), ("min", "min"))
    assert sorted(encoder.pareto.paint()["front"]) == sorted(exact.tolist())


@pytest.mark.parametrize("modes", [("min", "max", "min"), ("max", "min", "min", "max")])
def test_three_or_four_objectives_a_hypervolume_by_slabs_as_the_exact_one(modes):
    rng = random.Random(9)
    names = "abcd"[: len(modes)]
    reference = tuple(-0.2 if m == "max" else 1.2 for m in modes)
    frames = ParetoFrames(tuple(names), modes, reference=reference)
    points = {}
    for t in range(40):
        points[t] = tuple(rng.random() for _ in modes)
        frames.fold([TrialRecord(id=t, config={}, status="completed", value=0.0, best=0.0,
                                 step=1, attempts=1,
                                 objectives=dict(zip(names, points[t], strict=True)))])
    paint = frames.paint()                    # a paced hypervolume owed is computed for it
    ids = sorted(brute_front(points, modes))
    assert sorted(paint["front"]) == ids
    exact = hypervolume([points[i] for i in ids], modes, reference)
    assert paint["hv"][-1][1] == pytest.approx(exact, rel=1e-5)
