"""A sweep's trials as a dashboard's tasks: a paused PBT member is one bar an execution.

A PBT member that pauses (other members take their turn) or exploits waits to
run again (``TrialRequeued``).  On the dashboard's timeline it showed as one long
task from its first start to its end, the waits included.  Here a real PBT sweep
of 6 members on 2 threads runs with its events going through the dashboard's
path (:class:`~labkit.views.trackers.sweep_shelf.SweepShelf` into a
:class:`~labkit.views.trackers.tracker.Tracker`): each member's spans are its executions,
one a start, none overlapping, each ended before the next began.
"""

from __future__ import annotations

import threading

import labkit as lk
from labkit.events import TrialRequeued, TrialStarted
from labkit.views.trackers.sweep_shelf import SweepShelf
from labkit.views.trackers.tracker import Tracker
from tests.experiments.test_pbt import SPACE, Climb, pbt


def test_a_paused_pbt_member_is_a_task_an_execution_on_the_timeline():
    tracker = Tracker(max_spans=10_000)
    starts: dict[int, list[float]] = {}
    requeued: dict[int, list[float]] = {}
    lock = threading.Lock()

    def note(event) -> None:
        with lock:
            if isinstance(event, TrialStarted):
                starts.setdefault(event.trial, []).append(event.time)
            elif isinstance(event, TrialRequeued):
                requeued.setdefault(event.trial, []).append(event.time)

    with lk.DaskScheduler(mode="threads", n_workers=1, threads_per_worker=2) as s:
        shelf = SweepShelf(s, sink=tracker)
        unsubscribe = [s.subscribe(shelf), s.subscribe(note)]
        try:
            result = lk.sweep(Climb(pause=0.002), SPACE, search=pbt(), trials=6, metric="score",
                              mode="max", seed=0, store=None, scheduler=s)
        finally:
            for off in unsubscribe:
                off()
    assert all(t.status == "completed" for t in result.trials)
    assert sum(map(len, requeued.values())) >= 6         # every member waited at least once
    spans = [sp for sp in tracker.spans_since(-1) if sp.node_name == "trials"]
    for trial, begun in starts.items():
        mine = sorted((sp.start, sp.end) for sp in spans if sp.chunk == trial)
        assert len(mine) == len(begun) == len(requeued.get(trial, ())) + 1, (trial, mine)
        assert [a for a, _ in mine] == sorted(begun)     # a bar from each start
        for (_, end), (start, _) in zip(mine, mine[1:], strict=False):
            assert end <= start                          # ended at the pause, not over the wait
