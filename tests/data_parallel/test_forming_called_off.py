"""A rank waiting for peers that will not come gives its worker's thread back when the
forming is called off, rather than at the rendezvous' timeout (issue 47).

A member of a group that retires while the group forms leaves the other ranks in the
rendezvous; the client sees the loss within a second and tears the group (or its process
group) down.  Before, the waiting rank's task held its worker's one thread until the
rendezvous timed out (60 s by default), and the next forming's task on that worker
queued behind it.  Real worker processes, real torch.distributed (gloo, a file store).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import uuid

import pytest
import torch
from torch import nn

import labkit as lk
from labkit.data_parallel.dask.setup import payload
from labkit.data_parallel.worker import lifecycle as life
from labkit.errors import SchedulerError

RENDEZVOUS_TIMEOUT = 600.0  # far beyond the test: only a call-off ends the wait early


@pytest.fixture(scope="module")
def one():
    """One worker process with one thread, under a nanny."""
    with lk.DaskScheduler(mode="processes", n_workers=1, threads_per_worker=1) as s:
        yield s


@pytest.fixture
def store():
    folder = tempfile.mkdtemp(prefix="labkit-test-forming-")
    yield "file://" + os.path.join(folder, "store")
    shutil.rmtree(folder, ignore_errors=True)


def waiting_rank(scheduler, url):
    """A rank 0 of a world of 2 on the worker, waiting in the rendezvous; (gid, worker, join)."""
    client = scheduler.client
    (worker,) = sorted(client.nthreads())
    model = nn.Linear(3, 1)
    shipped = payload(model, nn.functional.mse_loss, torch.optim.SGD(model.parameters(), lr=0.1))
    gid = uuid.uuid4().hex
    built = client.submit(life.build, gid, 0, worker, shipped, None, workers=[worker], pure=False)
    assert built.result(timeout=120) == "cpu"
    joining = client.submit(
        life.join, gid, 0, 2, url, "gloo", RENDEZVOUS_TIMEOUT, "127.0.0.1", 1,
        workers=[worker], pure=False,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while client.run(forming, gid)[worker] != 1:  # in the rendezvous, generation 1
        assert time.monotonic() < deadline, "the join never ran"
        assert not joining.done(), joining
        time.sleep(0.05)
    return gid, worker, joining


def forming(gid):
    """On the worker: the generation its rank of ``gid`` waits to form (None: none)."""
    rank = life.RANKS.get(gid)
    return None if rank is None else rank.forming


def next_task_runs(client, worker):
    """A task queued on the worker's one thread runs now (nothing holds the thread)."""
    assert client.submit(os.getpid, workers=[worker], pure=False).result(timeout=60) > 0


@pytest.mark.parametrize("call_off", [life.teardown_group, life.teardown], ids=["group", "rank"])
def test_a_forming_called_off_frees_the_worker_thread_at_once(one, store, call_off):
    client = one.client
    gid, worker, joining = waiting_rank(one, store)
    client.run(call_off, gid, workers=[worker])
    with pytest.raises(SchedulerError, match="called off"):
        joining.result(timeout=60)  # far sooner than the rendezvous' 600 s
    next_task_runs(client, worker)
    client.run(life.teardown, gid, workers=[worker])


def _built_rank(client) -> tuple[str, str, nn.Module]:
    """``(worker, group id, model)`` of a replica of a small model built on the one worker."""
    (worker,) = sorted(client.nthreads())
    model = nn.Linear(3, 1)
    shipped = payload(model, nn.functional.mse_loss, torch.optim.SGD(model.parameters(), lr=0.1))
    gid = uuid.uuid4().hex
    client.submit(life.build, gid, 0, worker, shipped, None, workers=[worker], pure=False).result(
        timeout=120
    )
    return worker, gid, model


def test_a_call_off_before_the_forming_leaves_the_next_forming_alone(one, store):
    """``teardown_group`` before a forming (a group about to grow) calls nothing off: the
    forming that follows completes."""
    client = one.client
    worker, gid, model = _built_rank(client)
    client.run(life.teardown_group, gid, workers=[worker])
    joined = client.submit(
        life.join, gid, 0, 1, store, "gloo", 60.0, "127.0.0.1", 1, workers=[worker], pure=False
    )
    assert "127.0.0.1" in joined.result(timeout=120)  # the interface it joined on, described
    client.run(life.teardown, gid, workers=[worker])


def test_a_torn_down_rank_has_no_state_to_give_and_says_so_without_an_error(one):
    """A trial's group taken back tears its ranks down; the trainer's last look at a rank's
    state then gets None (no KeyError logged on the worker by Dask)."""
    client = one.client
    worker, gid, model = _built_rank(client)
    held = client.run(life.held_state, gid, workers=[worker])[worker]
    assert held["model"].keys() == model.state_dict().keys()
    client.run(life.teardown, gid, workers=[worker])
    assert client.run(life.held_state, gid, workers=[worker]) == {worker: None}
