"""Worker processes of an embedded cluster forked from a fork server (labkit/scheduling/dask/worker_start.py)."""

from __future__ import annotations

import os
import time

import psutil
import pytest

import labkit as lk
from labkit.errors import InputError
from labkit.scheduling.dask import worker_start


def _parent_and_modules():
    """On a worker: its parent's command line and whether labkit was loaded."""
    import sys

    parent = psutil.Process(os.getppid())
    return " ".join(parent.cmdline()), parent.pid, "labkit" in sys.modules


def _worker_pids(client) -> dict:
    """Each worker's process id, by address."""
    return client.run(os.getpid, on_error="ignore")  # one dying: left out


def test_workers_and_their_restarts_are_forked_from_a_server_that_loaded_labkit():
    with lk.DaskScheduler(mode="processes", n_workers=2) as s:
        s.client.wait_for_workers(2)
        seen = s.client.run(_parent_and_modules)
        assert len(seen) == 2
        for command, parent, loaded in seen.values():
            assert "multiprocessing.forkserver" in command      # not this process: the server
            assert parent != os.getpid()
            assert loaded
        server = psutil.Process(next(iter(seen.values()))[1])
        assert "labkit" in " ".join(server.cmdline())            # labkit is in its preload list
        # a worker that dies is started again by its nanny: forked from the same server
        before = _worker_pids(s.client)
        victim = next(iter(before.values()))
        psutil.Process(victim).kill()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # the nanny sees the death, then starts another
            now = _worker_pids(s.client)
            if len(now) == 2 and victim not in now.values():
                break
            time.sleep(0.1)
        else:
            pytest.fail(f"the killed worker was not replaced in 120 s: {now}")
        again = s.client.run(_parent_and_modules)
        assert {parent for _, parent, _ in again.values()} == {server.pid}


def test_spawn_asked_for_is_spawn():
    with lk.DaskScheduler(mode="processes", n_workers=1, start_method="spawn") as s:
        s.client.wait_for_workers(1)
        [(command, parent, _)] = s.client.run(_parent_and_modules).values()
    assert parent == os.getpid()
    assert "multiprocessing.forkserver" not in command


def test_the_default_is_the_fork_server_where_the_platform_has_one():
    assert worker_start.resolve_start_method(None) == "forkserver"   # Linux
    assert worker_start.resolve_start_method("spawn") == "spawn"
    assert worker_start.preloaded()[0] == "distributed"
    assert worker_start.preloaded()[-1] == "labkit"
    assert {"dask", "numpy"} <= set(worker_start.preloaded())


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        (dict(mode="processes", start_method="fork"), "start_method"),
        (dict(mode="threads", start_method="spawn"), 'mode="processes"'),
        (dict(mode="auto", start_method="forkserver"), 'mode="processes"'),
        (dict(address="tcp://127.0.0.1:1", start_method="spawn"), "embedded cluster only"),
    ],
)
def test_a_start_method_where_it_means_nothing_is_an_input_error(kwargs, words):
    with pytest.raises(InputError, match="start_method") as caught:
        lk.DaskScheduler(**kwargs)
    assert words in str(caught.value)
