"""A stored sweep names its workers as the live board did: the cluster closed, in a new process.

The sweep keeps each worker's Dask name with it (``result.workers``); the board of
``lk.load_sweep(...)`` reads them from there, not from a cluster that is gone.
"""

from __future__ import annotations

import json
import subprocess
import sys

import labkit as lk
from labkit.experiments.live import finished_run
from labkit.views.notebook.board import board
from labkit.views.trackers.device_names import DeviceNames
from labkit.views.sweep.board import SweepBoard
from tests.experiments import functions as F
from tests.views.frames_page import frames_of
from tests.views.test_sweep_board import wait_stopped

# what a new process says of the stored sweep: each trial's worker, as its board names it
NEW_PROCESS = """
import json, sys
import labkit as lk
from labkit.experiments.live import finished_run
from labkit.views.trackers.device_names import DeviceNames
result = lk.load_sweep(sys.argv[1], sys.argv[2])
names = DeviceNames(finished_run(result).sources)
print(json.dumps({t.id: names(t.worker) for t in result.trials}))
"""


def said(comms, shown) -> tuple[list, list]:
    """The workers a board's last frame names, and those of its workers' load."""
    frames = frames_of(comms, shown.widget)
    metas = [f["meta"] for f in frames if "meta" in f]
    loads = [w["name"] for f in frames for w in (f.get("load") or [])]
    return sorted(metas[-1]["workers"]), sorted(set(loads))


def in_new_process(store: str, name: str) -> dict:
    """Each trial's worker as a board in a new process names it."""
    out = subprocess.run(
        [sys.executable, "-c", NEW_PROCESS, store, name],
        capture_output=True, text=True, timeout=120, check=True,
    )
    return {int(k): v for k, v in json.loads(out.stdout.strip().splitlines()[-1]).items()}


def test_a_stored_board_names_workers_as_the_live_board_did_with_the_cluster_gone(comms, tmp_path):
    store = str(tmp_path / "names.db")
    with lk.DaskScheduler(mode="processes", n_workers=2, threads_per_worker=1) as s:
        run = lk.sweep(F.curve, {"q": lk.uniform(0.5, 1.0), "steps": 3, "pause": 0.05}, trials=6, metric="acc",
                       mode="max", scheduler=s, seed=0, store=store, name="named", wait=False)
        live = SweepBoard(run)
        try:
            run.result(timeout=120)
            wait_stopped(live)
            live_workers, live_loads = said(comms, live)
            live_rows = {t.id: live.encoder.names(t.worker) for t in run.result().trials}
        finally:
            live.close()
    assert live_workers and all(w.startswith("worker ") for w in live_workers), live_workers
    assert live_loads and all(w in live_workers for w in live_loads), live_loads

    result = lk.load_sweep(store, "named")   # the cluster is closed: only the store knows
    assert set(result.worker_names.values()) <= {0, 1} and result.worker_names
    stored = board(result)
    try:
        wait_stopped(stored)
        workers, loads = said(comms, stored)
        assert workers == live_workers   # an ended sweep's board shows no load: none to name
        assert set(loads) <= set(live_loads), loads
    finally:
        stored.close()
    names = DeviceNames(finished_run(result).sources)
    here = {t.id: names(t.worker) for t in result.trials}
    assert here == live_rows and all("127.0.0.1" not in w for w in here.values()), here
    assert in_new_process(store, "named") == live_rows
    assert store_table(store) == [live_rows[i] for i in sorted(live_rows)]


def store_table(store: str) -> list:
    """The worker column of ``labkit dashboard --store``'s table (the shelf and plots it serves)."""
    from labkit.views.trackers.store_shelf import StoreShelf
    from labkit.views.bokeh.sweep_plots import SweepPlots

    shelf = StoreShelf(store)
    try:
        plots = SweepPlots(shelf, shelf.names)   # what store_dashboard attaches to a page
        plots.update()
        data = plots.table.source.data
        return [w for _, w in sorted(zip(data["id"], data["worker"], strict=True))]
    finally:
        shelf.stop()


def reporting(config, trial):
    """One report: a group trial that holds its workers and ends."""
    trial.report(0, loss=config["x"])


def test_a_stored_group_sweep_names_each_worker_of_a_group(tmp_path):
    store = str(tmp_path / "groups.db")
    with lk.DaskScheduler(mode="processes", n_workers=4, threads_per_worker=1) as s:
        result = lk.sweep(reporting, {"x": lk.uniform(0, 1)}, trials=4, scheduler=s,
                          workers_per_trial=2, metric="loss", mode="min", store=store,
                          name="groups", seed=0)
        live = DeviceNames([s])
        live_rows = {t.id: live(t.worker) for t in result.trials}
    assert all(", " in w and "127.0.0.1" not in w for w in live_rows.values()), live_rows
    loaded = lk.load_sweep(store, "groups")
    assert result.worker_names == loaded.worker_names and len(loaded.worker_names) >= 2
    names = DeviceNames(finished_run(loaded).sources)
    assert {t.id: names(t.worker) for t in loaded.trials} == live_rows
    assert in_new_process(store, "groups") == live_rows
    assert store_table(store) == [live_rows[i] for i in sorted(live_rows)]
