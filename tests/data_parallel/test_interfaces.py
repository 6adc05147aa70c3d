"""The interface a rank's process group binds, and the probe that ranks can meet.

Across real hosts these run in ``tests/multihost``; here on one machine.
"""

from __future__ import annotations

import os
import socket

import pytest

from labkit.data_parallel.worker import network as interfaces
from labkit.data_parallel.worker.network import Binding, binding, bound, interface_of, listen, reach
from labkit.errors import InputError


def loopback() -> str:
    return next(n for _, n in socket.if_nameindex() if n.startswith("lo"))


def test_the_interface_of_an_address_is_the_one_holding_it():
    assert interface_of("127.0.0.1") == loopback()
    assert interface_of("localhost") == loopback()
    assert interface_of("192.0.2.7") is None          # TEST-NET-1: held by no machine


def test_a_rank_binds_the_interface_of_its_workers_address(monkeypatch):
    monkeypatch.delenv("GLOO_SOCKET_IFNAME", raising=False)
    choice = binding("gloo", "127.0.0.1")
    assert choice == Binding("GLOO_SOCKET_IFNAME", loopback(), "127.0.0.1", False)
    assert "chosen by labkit" in choice.describe()


def test_a_setting_on_the_worker_wins(monkeypatch):
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", loopback())
    choice = binding("nccl", "192.0.2.7")
    assert choice.explicit and choice.interface == loopback()
    assert choice.address == "127.0.0.1"
    assert "set on the worker" in choice.describe()


def test_a_setting_naming_no_interface_is_an_error_naming_it(monkeypatch):
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "nosuch0")
    with pytest.raises(InputError, match="GLOO_SOCKET_IFNAME=nosuch0.*unset it") as info:
        binding("gloo", "127.0.0.1")
    assert info.value.where["argument"] == "GLOO_SOCKET_IFNAME"


def test_an_address_on_no_interface_falls_back_to_the_host_name(monkeypatch):
    monkeypatch.delenv("GLOO_SOCKET_IFNAME", raising=False)
    choice = binding("gloo", "192.0.2.7")
    assert choice.interface is None
    assert choice.address == socket.getaddrinfo(socket.gethostname(), None)[0][4][0]
    assert "from the host name" in choice.describe()


def test_gloo_is_told_for_the_set_up_only_and_nccl_for_good(monkeypatch):
    for var in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"):
        monkeypatch.setenv(var, "")   # recorded, so that monkeypatch removes what bound() sets
        monkeypatch.delenv(var)
    with bound(binding("gloo", "127.0.0.1")):
        assert os.environ["GLOO_SOCKET_IFNAME"] == loopback()
    assert "GLOO_SOCKET_IFNAME" not in os.environ
    with bound(binding("nccl", "127.0.0.1")):
        assert os.environ["NCCL_SOCKET_IFNAME"] == loopback()
    assert os.environ["NCCL_SOCKET_IFNAME"] == loopback()


def test_an_explicit_setting_is_left_as_it_is(monkeypatch):
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", loopback())
    with bound(binding("gloo", "192.0.2.7")):
        pass
    assert os.environ["GLOO_SOCKET_IFNAME"] == loopback()


def test_the_probe_reaches_a_listening_rank_and_names_one_that_is_not():
    gid = "probe-test"
    try:
        opened = listen(gid, "gloo", "127.0.0.1", "127.0.0.1")
        port = opened["ports"]["127.0.0.1"]
        assert reach([(0, "127.0.0.1", port)]) == []
    finally:
        interfaces.close_probe(gid)
    assert gid not in interfaces._PROBES
    [(rank, address, dead, error)] = reach([(3, "127.0.0.1", port)], timeout=2)
    assert (rank, address, dead) == (3, "127.0.0.1", port)
    assert "ConnectionRefusedError" in error


class RanksHere:
    """The replica group's tasks run here, one after another: the probe itself is real.

    Each rank's listeners are kept apart, as on a worker of its own (in one process the
    next rank's would replace them under the group's id).
    """

    def __init__(self, gid: str, names: list[str]):
        self.gid, self.names = gid, names
        self.held: list[socket.socket] = []

    def submit(self, rank, fn, *args):
        return lambda: fn(*args)

    def run(self, calls, phase):
        out = []
        for call in calls:
            out.append(call())
            self.held += interfaces._PROBES.pop(self.gid, [])
        return out

    def beside(self, fn, *args, workers):
        fn(*args)
        for s in self.held:
            s.close()


def test_a_peers_loopback_on_another_host_is_unreachable_without_trying(monkeypatch):
    """On one machine both ranks' loopback listeners answer each other; on two hosts a
    connection to the peer's 127.0.0.1 reaches the connecting host, where any process
    listening on that port would have passed for the peer (a flaky pass in the namespace
    tests). The probe reports such pairs without trying them."""
    from labkit.data_parallel.dask.reach import check_reach
    from labkit.errors import SchedulerError

    monkeypatch.setenv("GLOO_SOCKET_IFNAME", loopback())
    names = ["tcp://10.9.0.1:4001", "tcp://10.9.0.2:4002"]
    ranks = RanksHere("two-hosts", names)
    with pytest.raises(SchedulerError) as info:
        check_reach(ranks, "gloo", ["10.9.0.1", "10.9.0.2"], None)
    message = str(info.value)
    assert "(2 of 2 connections failed)" in message, message
    for rank, peer in ((0, 1), (1, 0)):
        assert f"rank {rank} (worker {names[rank]}) cannot connect to rank {peer} at 127.0.0.1:" \
            in message, message
    assert message.count("from another host is that host itself") == 2, message
    assert info.value.where["replica"] == 0
    assert len(ranks.held) == 2 and all(s.fileno() == -1 for s in ranks.held)   # closed
    # the same ranks on one host reach each other's loopback, and pass
    ranks = RanksHere("one-host", names)
    check_reach(ranks, "gloo", ["10.9.0.1", "10.9.0.1"], None)
    assert len(ranks.held) == 2 and all(s.fileno() == -1 for s in ranks.held)
