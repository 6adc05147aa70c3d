"""Workers by their Dask names: in full on the device plot, the name alone on a task lane."""

from __future__ import annotations

import labkit as lk
from labkit.views.device_names import DeviceNames


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
