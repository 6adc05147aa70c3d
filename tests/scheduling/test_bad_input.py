"""The schedulers' bad-input table: constructors and the cluster they reach.

Each case gives a scheduler constructor one bad argument and checks that the
error is the labkit type it should be, that its message names the argument
or address, that it comes at once (or within the connect timeout it was
given), and that the cluster it would have used works right after: a
scheduler on the same client trains a task.
"""

from __future__ import annotations

import time

import pytest

import labkit as lk
from labkit.scheduling.dask.connect import CONNECT_TIMEOUT, check_address
from tests.helpers import own_client

UNREACHABLE = "tcp://127.0.0.1:1"   # port 1: nothing listens there


def cases(client):
    """name -> (constructor call, error type, words the message names)."""
    return {
        "client is a string": (lambda: lk.DaskScheduler(client="garbage"),
                               lk.InputError, ("client", "distributed.Client", "'garbage'")),
        "client is an int": (lambda: lk.DaskScheduler(client=5), lk.InputError, ("client",)),
        "address and client both": (lambda: lk.DaskScheduler(UNREACHABLE, client=client),
                                    lk.InputError, ("address", "client")),
        "address is not an address": (lambda: lk.DaskScheduler("not an address"),
                                      lk.InputError, ("'not an address'", "tcp://host:port")),
        "address without a port": (lambda: lk.DaskScheduler("tcp://x"),
                                   lk.InputError, ("'tcp://x'",)),
        "address port out of range": (lambda: lk.DaskScheduler("tcp://127.0.0.1:70000"),
                                      lk.InputError, ("tcp://127.0.0.1:70000",)),
        "address is an int": (lambda: lk.DaskScheduler(8786), lk.InputError, ("8786", "str")),
        "unreachable address": (lambda: lk.DaskScheduler(UNREACHABLE, connect_timeout=1),
                                lk.SchedulerError, (UNREACHABLE, "within 1 s")),
        "connect_timeout zero": (lambda: lk.DaskScheduler(UNREACHABLE, connect_timeout=0),
                                 lk.InputError, ("connect_timeout",)),
        "connect_timeout a word": (lambda: lk.DaskScheduler(UNREACHABLE, connect_timeout="soon"),
                                   lk.InputError, ("connect_timeout", "'soon'")),
        "n_workers -1": (lambda: lk.DaskScheduler(n_workers=-1), lk.InputError, ("n_workers",)),
        "n_workers 0": (lambda: lk.DaskScheduler(n_workers=0), lk.InputError, ("n_workers",)),
        "threads_per_worker 0": (lambda: lk.DaskScheduler(threads_per_worker=0),
                                 lk.InputError, ("threads_per_worker",)),
        "max_in_flight -1": (lambda: lk.DaskScheduler(client=client, max_in_flight=-1),
                             lk.InputError, ("max_in_flight", "-1")),
        "max_in_flight 2.5": (lambda: lk.DaskScheduler(client=client, max_in_flight=2.5),
                              lk.InputError, ("max_in_flight",)),
        "max_bytes_in_flight 0": (lambda: lk.DaskScheduler(client=client, max_bytes_in_flight=0),
                                  lk.InputError, ("max_bytes_in_flight",)),
        "direct_bytes 0": (lambda: lk.DaskScheduler(client=client, direct_bytes=0),
                           lk.InputError, ("direct_bytes",)),
        "mode unknown": (lambda: lk.DaskScheduler(mode="gpu"), lk.InputError, ("mode", "'gpu'")),
        "mode against processes": (lambda: lk.DaskScheduler(mode="threads", processes=True),
                                   lk.InputError, ("mode", "processes")),
        "local max_in_flight 0": (lambda: lk.LocalScheduler(max_in_flight=0),
                                  lk.InputError, ("max_in_flight",)),
        "connect_timeout inf": (lambda: lk.DaskScheduler(UNREACHABLE,
                                                         connect_timeout=float("inf")),
                                lk.InputError, ("connect_timeout", "inf")),
        "a keyword no cluster takes (threads)": (
            lambda: lk.DaskScheduler(mode="threads", nworkers=2), lk.InputError,
            ("'nworkers'", "LocalCluster")),
        "a keyword no cluster takes (processes)": (
            lambda: lk.DaskScheduler(mode="processes", n_workers=1, nworkers=2),
            lk.InputError, ("'nworkers'", "LocalCluster")),
        "address with n_workers": (lambda: lk.DaskScheduler(UNREACHABLE, n_workers=2),
                                   lk.InputError, ("n_workers", "embedded", "address")),
        "client with mode": (lambda: lk.DaskScheduler(client=client, mode="processes"),
                             lk.InputError, ("mode", "embedded", "client")),
        "client with a cluster keyword": (
            lambda: lk.DaskScheduler(client=client, memory_limit="1GB"), lk.InputError,
            ("memory_limit", "client")),
        "result_container a number": (lambda: lk.DaskScheduler(client=client,
                                                               result_container=5),
                                      lk.InputError, ("result_container", "int")),
    }


NAMES = list(cases(None))


@pytest.mark.parametrize("name", NAMES)
def test_bad_scheduler_arguments_are_located_labkit_errors_and_the_cluster_goes_on(
        name, cluster):
    with own_client(cluster.scheduler_address) as client:
        make, error, words = cases(client)[name]
        started = time.monotonic()
        with pytest.raises(error) as info:
            make()
        took = time.monotonic() - started
        message = str(info.value)
        assert isinstance(info.value, lk.LabkitError)
        assert all(word in message for word in words), message
        assert took < (5 if name == "unreachable address" else 2), took
        with lk.DaskScheduler(client=client) as s:   # the same cluster, right after
            s.add_task(3, lambda x: x * x)
            assert s.get_results() == [9]
            assert s.n_open_tasks == 0


def test_the_default_connect_timeout_is_at_most_ten_seconds_and_settable(monkeypatch):
    from labkit.scheduling.dask.connect import connect_timeout
    assert CONNECT_TIMEOUT <= 10 and connect_timeout() == CONNECT_TIMEOUT
    monkeypatch.setenv("LABKIT_CONNECT_TIMEOUT", "2.5")
    assert connect_timeout() == 2.5 and connect_timeout(7) == 7.0
    started = time.monotonic()
    with pytest.raises(lk.SchedulerError, match="within 2.5 s"):
        lk.DaskScheduler(UNREACHABLE)
    assert time.monotonic() - started < 6


def test_a_closed_client_is_refused_by_name(cluster):
    client = own_client(cluster.scheduler_address)
    client.close()
    with pytest.raises(lk.SchedulerError, match="closed"):
        lk.DaskScheduler(client=client)


@pytest.mark.parametrize("address", ["tcp://127.0.0.1:8786", "127.0.0.1:8786",
                                     "tls://scheduler.example:8786", "tcp://[::1]:8786",
                                     "inproc://10.0.0.1/123/1", "ucx://10.0.0.5:13337"])
def test_good_addresses_pass_the_check(address):
    assert check_address(address) == address
