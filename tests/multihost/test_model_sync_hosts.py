"""Across hosts, the model a user holds after ``fit`` is the one the workers trained (issue 44).

The two ranks are on two hosts (network namespaces), the client in the root
namespace: the copy after each call goes through the scheduler (Dask's own way
across hosts), or straight from the worker on a client made with
``direct_to_workers=True``.
"""

from __future__ import annotations

import pytest
import torch

import labkit as lk
from labkit.data_parallel import DataParallelTrainer
from tests.data_parallel.test_faults import assert_equal_states
from tests.data_parallel.test_model_sync import accuracy, accuracy_of_state, blobs, ce, classifier

pytestmark = pytest.mark.timeout(300)


@pytest.mark.parametrize("direct", [False, True])
def test_across_hosts_the_model_after_each_fit_is_the_trained_one(multihost, direct):
    from distributed import Client

    x, y = blobs()
    model = classifier()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    before = accuracy(model, x, y)
    with Client(multihost.scheduler_address, direct_to_workers=direct) as client, \
            lk.DaskScheduler(client=client) as s:
        with DataParallelTrainer(model, ce, optimizer, scheduler=s) as trainer:
            assert all("127.0.0.1" not in n for n in trainer.names)  # off this host
            for epoch in range(3):
                trainer.fit((x, y), batch_size=64, epochs=1, seed=epoch)
                state = trainer.state_dict()
                assert_equal_states(dict(model.state_dict()), dict(state["model"]))
                assert_equal_states(optimizer.state_dict(), state["optimizer"])
                assert accuracy(model, x, y) == accuracy_of_state(state, x, y)
    assert accuracy(model, x, y) > before + 0.3
