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


def test_the_default_is_the_fork_server_where_the_platform_has_one(monkeypatch):
    monkeypatch.delenv(worker_start.PRELOAD_ENV, raising=False)
    assert worker_start.resolve_start_method(None) == "forkserver"   # Linux
    assert worker_start.resolve_start_method("spawn") == "spawn"
    assert worker_start.preloaded()[0] == "distributed"
    assert worker_start.preloaded()[-1] == "labkit"
    assert {"dask", "numpy"} <= set(worker_start.preloaded())
    assert "torch" not in worker_start.preloaded()


def test_the_variable_adds_modules_after_labkit_and_refuses_one_not_installed(monkeypatch):
    monkeypatch.setenv(worker_start.PRELOAD_ENV, " torch, json ,,torch")
    assert worker_start.preloaded()[-3:] == ["labkit", "torch", "json"]
    for missing in ("no_such_module_here", "json.no_such_part", "no_such_package.part"):
        monkeypatch.setenv(worker_start.PRELOAD_ENV, f"torch,{missing}")
        with pytest.raises(InputError) as caught:
            worker_start.preloaded()
        assert worker_start.PRELOAD_ENV in str(caught.value) and repr(missing) in str(caught.value)
    monkeypatch.setenv(worker_start.PRELOAD_ENV, "no_such_module_here")
    with pytest.raises(InputError, match=worker_start.PRELOAD_ENV):  # at the cluster's start
        lk.DaskScheduler(mode="processes", n_workers=1)


def _torch_loaded() -> bool:
    """On a worker, before any torch work: whether torch is loaded."""
    import sys

    return "torch" in sys.modules


def test_a_forked_worker_starts_with_what_the_variable_named_a_spawned_one_without():
    """The suite's fork server loads torch (tests/conftest.py sets the variable before any
    cluster starts): its workers start with torch; a spawned worker imports only its own."""
    assert "torch" in os.environ[worker_start.PRELOAD_ENV].split(",")
    with lk.DaskScheduler(mode="processes", n_workers=1) as s:
        s.client.wait_for_workers(1)
        assert list(s.client.run(_torch_loaded).values()) == [True]
    with lk.DaskScheduler(mode="processes", n_workers=1, start_method="spawn") as s:
        s.client.wait_for_workers(1)
        assert list(s.client.run(_torch_loaded).values()) == [False]


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
