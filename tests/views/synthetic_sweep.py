"""A synthetic sweep's events, straight into a tracker: no cluster, any size.

``synthetic_sweep(run, n)`` yields what a sweep of ``n`` trials would emit:
``SweepStarted`` with every trial pending, then ``slots`` trials at a time
(round robin) each started, reporting one step at a time, and finished,
stopped at a rung as ASHA (``min_steps=2, reduction=3``) would stop it:
a trial goes on past rungs 2, 6 and 18 only while it is in the best third
of the trials that reached that rung.  Each trial has a quality from the
seed; its accuracy climbs towards it.  The benchmark
``benchmarks/bench_board_frames.py`` and the board's tests feed it.
"""

from __future__ import annotations

import bisect
import math
import random
from collections import deque
from collections.abc import Iterator

from labkit.events import RunFinished, SweepStarted, TrialFinished, TrialReported, TrialStarted
from labkit.experiments import TrialRecord

SPACE = {
    "lr": {"type": "loguniform", "lo": 1e-4, "hi": 0.1},
    "width": {"type": "choice", "values": [64, 128, 256]},
    "dropout": {"type": "uniform", "lo": 0.0, "hi": 0.5},
}
RUNGS = (2, 6, 18)


def configs(n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    return [{"lr": 10 ** rng.uniform(-4, -1), "width": rng.choice([64, 128, 256]),
             "dropout": rng.uniform(0, 0.5)} for _ in range(n)]


def synthetic_sweep(run: str, n: int, reports: int = 30, slots: int = 8,
                    seed: int = 0, end: bool = True) -> Iterator:
    """The events of a sweep of ``n`` trials, in the order a sweep would emit them."""
    rng = random.Random(seed + 1)
    confs = configs(n, seed)
    quality = [rng.uniform(0.5, 0.99) for _ in range(n)]
    yield SweepStarted(run, "synthetic", "acc", "max", SPACE,
                       tuple({"id": i, "config": c, "status": "pending"}
                             for i, c in enumerate(confs)), slots, "ASHA(min_steps=2, reduction=3)")
    at_rung: dict[int, list[float]] = {r: [] for r in RUNGS}  # each kept sorted, ascending
    waiting, running = deque(range(n)), {}      # running: trial -> (step, worker, best)
    while waiting or running:
        while waiting and len(running) < slots:
            trial = waiting.popleft()
            worker = f"tcp://127.0.0.1:{4000 + len(running) % 2} #{len(running)}"
            running[trial] = (0, worker, None)
            yield TrialStarted(run, trial, confs[trial], worker)
        for trial in list(running):
            step, worker, best = running[trial]
            acc = quality[trial] * (1 - math.exp(-(step + 1) / 6)) + rng.gauss(0, 0.01)
            best = acc if best is None else max(best, acc)
            yield TrialReported(run, trial, (step,), ({"acc": acc, "loss": 1 - acc},), acc, best)
            status = None
            if step + 1 in RUNGS:
                seen = at_rung[step + 1]
                bisect.insort(seen, acc)            # not a sort a trial: 10,000 of them
                if acc < seen[-1 - max(len(seen) // 3 - 1, 0)]:  # below the best third
                    status = "stopped"
            if step + 1 >= reports:
                status = "completed"
            if status is None:
                running[trial] = (step + 1, worker, best)
                continue
            del running[trial]
            yield TrialFinished(run, TrialRecord(
                id=trial, config=confs[trial], status=status, value=acc, best=best, step=step,
                attempts=1, worker=worker, reason="ASHA" if status == "stopped" else None))
    if end:
        yield RunFinished(run, True)
