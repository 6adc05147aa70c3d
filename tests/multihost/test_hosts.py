"""The namespace cluster behaves like separate hosts: own addresses, shared host name, real losses."""

from __future__ import annotations

import ipaddress
import os
import socket
import subprocess
import sys
import time

import pytest

from tests.multihost import conftest as multihost_conftest


def _where_am_i():
    """Run on a worker: its address and what its host name resolves to."""
    import socket as s

    from distributed import get_worker
    return get_worker().address, s.gethostbyname(s.gethostname())


def _workers(client) -> dict[str, str]:
    """name -> address of the workers the scheduler knows."""
    info = client.scheduler_info(n_workers=-1)["workers"]
    return {str(w["name"]): addr for addr, w in info.items()}


def _host_of(address: str) -> str:
    """The IP part of ``tcp://IP:PORT``."""
    return address.split("://", 1)[1].rsplit(":", 1)[0]


def test_each_worker_has_its_own_address_in_the_subnet(multihost, multihost_client):
    workers = _workers(multihost_client)
    assert set(workers) == {"host1", "host2"}
    hosts = [_host_of(a) for a in workers.values()]
    assert len(set(hosts)) == 2, workers
    for name, addr in workers.items():
        host = int(name.removeprefix("host"))
        assert addr == multihost.worker_address(host)
        assert _host_of(addr) == multihost.address(host)
        assert ipaddress.ip_address(_host_of(addr)) in multihost.subnet
        assert not ipaddress.ip_address(_host_of(addr)).is_loopback
    assert _host_of(multihost.scheduler_address) not in hosts


def test_host_name_resolves_to_loopback_on_every_worker(multihost_client):
    """The trap other code must avoid: the host name says 127.0.0.1 on every host."""
    resolved = multihost_client.run(lambda: socket.gethostbyname(socket.gethostname()))
    assert len(resolved) == 2
    assert set(resolved.values()) == {"127.0.0.1"}, resolved


def test_client_in_root_namespace_submits_to_each_worker_by_address(multihost, multihost_client):
    for host in (1, 2):
        addr = multihost.worker_address(host)
        fut = multihost_client.submit(_where_am_i, workers=[addr], allow_other_workers=False,
                                      pure=False)
        ran_at, resolved = fut.result(timeout=30)
        assert ran_at == addr
        assert resolved == "127.0.0.1"


def test_data_moves_between_hosts_over_the_bridge(multihost, multihost_client):
    client = multihost_client
    data = client.submit(lambda: bytes(2_000_000), workers=[multihost.worker_address(1)],
                         allow_other_workers=False, pure=False)
    size = client.submit(len, data, workers=[multihost.worker_address(2)],
                         allow_other_workers=False, pure=False)
    assert size.result(timeout=30) == 2_000_000
    assert multihost.worker_address(2) in client.who_has(data)[data.key]


def test_loopback_of_a_host_is_its_own(multihost):
    """127.0.0.1 on a worker host does not reach the scheduler: loopback is per namespace."""
    probe = ("import socket\n"
             "for addr in [('127.0.0.1', %d), (%r, %d)]:\n"
             "    try:\n"
             "        socket.create_connection(addr, timeout=5).close(); print('open')\n"
             "    except OSError: print('closed')\n"
             % (multihost.scheduler_port, multihost.address(0), multihost.scheduler_port))
    done = multihost.run_in(1, [sys.executable, "-c", probe])
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["closed", "open"]


def test_veth_names_the_links_on_both_sides(multihost):
    for host in multihost.hosts:
        link = multihost.veth(host)
        for ns, ifname in [(link.host_ns, link.host_if), (link.switch_ns, link.switch_if)]:
            done = subprocess.run(["ip", "-n", ns, "-o", "link", "show", ifname],
                                  capture_output=True, text=True)
            assert done.returncode == 0 and "state UP" in done.stdout, (ns, ifname, done)
    root = multihost.root_veth()
    assert subprocess.run(["ip", "link", "show", root.host_if], capture_output=True).returncode == 0


def test_killing_a_worker_removes_it_from_the_scheduler(make_multihost):
    cluster = make_multihost(n_workers=2)
    with cluster.client() as client:
        cluster.kill_worker(2)
        with pytest.raises(ProcessLookupError):
            os.kill(cluster.pids()[2], 0)
        deadline = time.monotonic() + 30
        while set(_workers(client)) != {"host1"}:
            assert time.monotonic() < deadline, f"still registered: {_workers(client)}"
            time.sleep(0.2)
        assert client.submit(_where_am_i, pure=False).result(timeout=30)[0] == \
            cluster.worker_address(1)


def test_close_leaves_no_namespace_link_process_or_file(make_multihost):
    cluster = make_multihost(n_workers=1)
    namespaces, links = list(cluster.namespaces), list(cluster.links)
    pids, tmpdir = list(cluster.pids().values()), cluster.tmpdir
    assert len(namespaces) == 3 and len(links) == 1 and len(pids) == 2
    cluster.close()
    cluster.close()  # idempotent
    listed = {line.split()[0] for line in
              subprocess.run(["ip", "netns", "list"], capture_output=True,
                             text=True).stdout.splitlines() if line.strip()}
    assert not listed & set(namespaces), listed
    all_links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    for link in links:
        assert f": {link}@" not in all_links and f": {link}:" not in all_links, all_links
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert not os.path.exists(tmpdir)


@pytest.mark.parametrize("required", [False, True])
def test_missing_rights_skip_or_fail_with_the_reason(monkeypatch, required):
    monkeypatch.setattr(multihost_conftest, "available", lambda: (False, "no CAP_NET_ADMIN"))
    if required:
        monkeypatch.setenv("LABKIT_REQUIRE_MULTIHOST", "1")
    else:
        # CI sets the newer switch too: both must be off for the skip.
        monkeypatch.delenv("LABKIT_REQUIRE_MULTIHOST", raising=False)
        monkeypatch.delenv("LABKIT_REQUIRE_SYSTEM", raising=False)
    outcome = pytest.fail.Exception if required else pytest.skip.Exception
    with pytest.raises(outcome, match="need root and network namespaces.*no CAP_NET_ADMIN"):
        multihost_conftest._require_multihost()
