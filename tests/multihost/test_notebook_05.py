"""Notebook 05 against the namespace cluster: DASK_SCHEDULER_ADDRESS instead of its own."""

import ast
import re

import pytest

from tests.notebooks.run import execute, figure, text
from tests.notebooks.test_05_scale_out import check_data_parallel


@pytest.mark.timeout(300)
def test_scale_out_notebook_on_other_hosts(multihost, monkeypatch):
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", multihost.scheduler_address)
    nb = execute("05-scale-out.ipynb")
    out = text(nb)
    assert f"using the existing cluster at {multihost.scheduler_address}" in out
    assert "scheduler pid:" not in out                  # it started nothing
    assert figure(nb, "workers connected:") == 2
    assert "run status: finished" in out
    assert figure(nb, "test accuracy:") > 0.9
    ran = ast.literal_eval(re.search(r"workers that ran tasks: (\[.*\])", out).group(1))
    assert sorted(ran) == ["host1", "host2"], ran
    hosts = {multihost.worker_address(h): multihost.address(h) for h in (1, 2)}
    check_data_parallel(out, lambda worker: f"eth0 {hosts[worker]} "
                                            "(GLOO_SOCKET_IFNAME=eth0, chosen by labkit)")
    assert figure(nb, "workers still on the cluster:") == 2   # labkit left it running
    with multihost.client() as client:
        assert len(client.scheduler_info()["workers"]) == 2
