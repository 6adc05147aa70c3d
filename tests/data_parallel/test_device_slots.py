"""A GPU worker's device is the worker's own: two groups on one host never share a GPU.

No GPU is needed: the workers of a real cluster offer a ``GPU`` resource, and
the test reads the CUDA indices that the groups of two trials would build on.
"""

from __future__ import annotations

import pytest
import torch
from distributed.comm import get_address_host
from torch import nn

import labkit as lk
from labkit.data_parallel.dask.group import DaskReplicaGroup
from labkit.data_parallel.dask.setup import check_devices, choose_workers, device_slots


@pytest.fixture(scope="module")
def gpu_workers():
    """Four worker processes of one host, each offering one GPU (a Dask resource)."""
    with lk.DaskScheduler(mode="processes", n_workers=4, threads_per_worker=1,
                          resources={"GPU": 1}) as s:
        yield s


def test_two_groups_on_one_host_take_four_distinct_gpus(gpu_workers):
    everyone = sorted(gpu_workers.client.nthreads())
    assert len(everyone) == 4 and len({get_address_host(a) for a in everyone}) == 1
    a, b, c, d = everyone
    chosen = {}
    for group in ([a, b], [d, c]):   # rank order need not be address order
        with gpu_workers.restricted(group) as trial_scheduler:
            chosen.update(zip(*choose_workers(trial_scheduler, None), strict=True))
    # the k-th worker of the host, by address, takes its k-th GPU, whatever its group
    assert chosen == {a: 0, b: 1, c: 2, d: 3}
    # the old rule (a rank's place among its own group's workers) gave both groups 0 and 1
    devices = [f"cuda:{chosen[n]} (GPU)" for n in everyone]
    check_devices(everyone, ["h"] * 4, devices)   # all four ranks at once: no two share
    with pytest.raises(lk.SchedulerError, match="got the same GPU"):
        check_devices([a, c], ["h", "h"], ["cuda:0 (GPU)", "cuda:0 (GPU)"])


def test_a_worker_keeps_its_gpu_in_any_group_and_over_the_whole_cluster(gpu_workers):
    everyone = sorted(gpu_workers.client.nthreads())
    names, slots = choose_workers(gpu_workers, None)   # every GPU worker, sorted
    assert names == everyone and slots == [0, 1, 2, 3]
    names, slots = choose_workers(gpu_workers, [everyone[3], everyone[1]])
    assert slots == [3, 1]


def test_workers_without_a_gpu_get_no_slot():
    info = {"tcp://h:1": {"resources": {"GPU": 1}}, "tcp://h:2": {"resources": {}},
            "tcp://h:3": {"resources": {"GPU": 2}}, "tcp://g:1": {"resources": {"GPU": 1}}}
    assert device_slots(["tcp://h:3", "tcp://g:1", "tcp://h:1"], info) == [1, 0, 0]
    with lk.DaskScheduler(mode="processes", n_workers=2, threads_per_worker=1) as s:
        names, slots = choose_workers(s, None)
        assert len(names) == 2 and slots is None   # CPU workers: the replicas stay on the CPU


def test_a_gloo_group_of_gpu_workers_builds_on_the_cpu(gpu_workers):
    group = sorted(gpu_workers.client.nthreads())[2:]
    model = nn.Linear(3, 1).double()
    with gpu_workers.restricted(group) as trial_scheduler, DaskReplicaGroup(
            model, nn.functional.mse_loss, torch.optim.SGD(model.parameters(), lr=0.1),
            trial_scheduler, backend="gloo") as replicas:
        assert replicas.names == group and replicas.devices == ["cpu", "cpu"]
        x = torch.ones(4, 3, dtype=torch.float64)
        loss, ranks = replicas.step(x, x.sum(1, keepdim=True), [2, 2])
        assert loss > 0 and [r["rows"] for r in ranks] == [2, 2]
