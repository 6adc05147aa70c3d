"""Joining on the workers of a cluster whose workers come and go: a worker that leaves
takes little trained work with it.

Each worker thread trains its chunks into a fork of its own, which a retired worker takes
with it; the chunks no joined fork covers are trained again after the phase.  On a
cluster whose workers have a ``lifetime`` the client takes the forks back every second
or so during the phase, so that a worker retired mid-phase (here by
``client.retire_workers``, at a moment the test picks) loses about a second of its work,
not all it trained.  The phase still counts every sample once.
"""

from __future__ import annotations

import collections
import threading

import labkit as lk
from labkit.events import NodeJoined, PhaseFinished, TaskFinished
from labkit.nodes.pca import PCA
from tests import helpers
from tests.flows.cases import X

CHUNKS = [X[i * 30:(i + 1) * 30] for i in range(40)]

#: Chunks the retired worker has finished when it is retired (about 2.4 s of its work).
BEFORE = 12


def test_a_worker_retired_mid_phase_takes_about_a_second_of_its_work_with_it(recorder):
    finished: collections.Counter = collections.Counter()
    due, victims = threading.Event(), []

    def on_event(event):
        recorder(event)
        if isinstance(event, TaskFinished) and not due.is_set():
            finished[event.worker] += 1
            if finished[event.worker] >= BEFORE:
                victims.append(event.worker)
                due.set()

    # a lifetime the phase never reaches: the workers say they will leave one day
    with lk.DaskScheduler(mode="processes", n_workers=2, lifetime="1h") as s:
        s.client.wait_for_workers(2, timeout=120)
        s.subscribe(on_event)
        flow = lk.ParallelFlow([helpers.SlowPCA(delay=0.2, output_dim=3)])
        run = flow.train([CHUNKS], scheduler=s, wait=False)  # joined on the workers
        assert due.wait(timeout=120)
        s.client.retire_workers(victims[:1])
        run.result(timeout=180)
    [phase] = recorder.of(PhaseFinished)
    again = phase.n_tasks - len(CHUNKS)
    assert again < BEFORE, f"{again} chunks trained again: the retired worker's fork was never taken"
    assert recorder.of(NodeJoined)[-1].state["samples"] == sum(len(c) for c in CHUNKS)
    serial = lk.Flow([PCA(output_dim=3)])
    serial.train([CHUNKS])
    helpers.assert_nodes_equal(serial[0], flow[0])
