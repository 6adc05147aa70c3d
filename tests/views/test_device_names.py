"""Workers by their Dask names: in full on the device plot, the name alone on a task lane."""

from __future__ import annotations

import labkit as lk
from labkit.views.trackers.device_names import DeviceNames


def test_an_in_process_worker_is_this_process_with_its_threads_and_a_lane_its_name():
    with lk.DaskScheduler(mode="threads", n_workers=1, threads_per_worker=2) as s:
        [address] = s.run_on_workers(lambda: 1)
        names = DeviceNames([s])
        assert names(address) == "worker 0 (this process, 2 threads)"
        assert names.short(address) == "worker 0"
    assert DeviceNames([]).short("tcp://10.0.0.1:4000") == "10.0.0.1:4000"   # no cluster


def test_a_group_trials_workers_are_each_called_by_name():
    with lk.DaskScheduler(mode="processes", n_workers=2, threads_per_worker=1) as s:
        a, b = sorted(s.client.nthreads(), key=lambda w: s.client.scheduler_info()["workers"][w]["name"])
        names = DeviceNames([s])
        assert names(f"{a}, {b}") == "worker 0, worker 1"
        assert names.short(f"{a}, {b}") == "worker 0, worker 1"


def test_a_stored_sweeps_board_names_workers_as_its_live_board_did(comms, tmp_path):
    from labkit.views.notebook.board import board
    from labkit.views.sweep.board import SweepBoard
    from tests.experiments import functions as F
    from tests.views.frames_page import frames_of
    from tests.views.test_sweep_board import wait_stopped

    store = str(tmp_path / "names.db")
    with lk.DaskScheduler(mode="processes", n_workers=2, threads_per_worker=1) as s:
        run = lk.sweep(F.curve, {"q": lk.uniform(0.5, 1.0), "steps": 3}, trials=6, metric="acc",
                       mode="max", scheduler=s, seed=0, store=store, name="named", wait=False)
        said = []
        for source in (run, None):
            shown = SweepBoard(run) if source else board(lk.load_sweep(store, "named"))
            try:
                run.result(timeout=120)
                wait_stopped(shown)
                metas = [f["meta"] for f in frames_of(comms, shown.widget) if "meta" in f]
                said.append(metas[-1]["workers"])
                kept = shown.widget.last["meta"]["workers"]
            finally:
                shown.close()
    assert said[0] and all(w.startswith("worker ") for w in said[0]), said   # not addresses
    assert sorted(said[1]) == sorted(said[0])
    assert sorted(kept) == sorted(said[0])
