"""Link shaping (tbf rate + NFQUEUE delay) measured between two namespaces of our own.

The fixture makes namespaces ``lks<pid>a``/``lks<pid>b`` joined by a veth pair
and a measuring server in ``b``; the tests shape the veth ends and measure, from
``a``, the median TCP round trip of small messages and the goodput of a bulk
transfer.  Needs root, iproute2 and iptables-legacy; skipped (with the reason)
without them, failed instead under ``LABKIT_REQUIRE_MULTIHOST=1``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.multihost import shaping
from tests.multihost.iproute import skip_or_fail

PORT, UDP_PORT = 5301, 5302
PEER = r'''
import json, socket, statistics, sys, time
mode, args = sys.argv[1], sys.argv[2:]

def serve():
    """TCP server: b'p' then echo small messages; b'b' then count bytes until EOF."""
    srv = socket.create_server(("0.0.0.0", int(args[0])))
    print("ready", flush=True)
    while True:
        conn, _ = srv.accept()
        with conn:
            kind = conn.recv(1)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if kind == b"p":
                while (data := conn.recv(64)):
                    conn.sendall(data)
            elif kind == b"b":
                first = None; n = 0
                while (data := conn.recv(1 << 20)):
                    first = first or time.perf_counter(); n += len(data)
                conn.sendall(json.dumps([n, time.perf_counter() - first]).encode())

def ping():
    """Median and min round trip (s) of args[2] 32-byte ping-pongs to args[0]:args[1]."""
    conn = socket.create_connection((args[0], int(args[1])))
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn.sendall(b"p"); times = []
    for _ in range(int(args[2])):
        t = time.perf_counter(); conn.sendall(b"x" * 32)
        got = 0
        while got < 32:
            got += len(conn.recv(64))
        times.append(time.perf_counter() - t)
    print(json.dumps({"rtt": statistics.median(times), "rtt_min": min(times)}))

def bulk():
    """Goodput (bit/s, measured by the server) of sending for args[2] seconds."""
    conn = socket.create_connection((args[0], int(args[1])))
    conn.sendall(b"b"); buf = b"\0" * (1 << 18); t0 = time.perf_counter()
    while time.perf_counter() - t0 < float(args[2]):
        conn.sendall(buf)
    conn.shutdown(socket.SHUT_WR)
    n, secs = json.loads(conn.recv(256))
    print(json.dumps({"bytes": n, "secs": secs, "rate": n * 8 / secs}))

def udprecv():
    """Receive numbered datagrams until 1 s of silence; print their order."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    sock.bind(("0.0.0.0", int(args[0]))); print("ready", flush=True)
    sock.settimeout(5); seen = []
    try:
        while True:
            seen.append(int(sock.recv(64))); sock.settimeout(1)
    except socket.timeout:
        pass
    print(json.dumps(seen))

def udpsend():
    """Send args[2] numbered datagrams to args[0]:args[1], in small bursts."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for i in range(int(args[2])):
        sock.sendto(str(i).encode(), (args[0], int(args[1])))
        if i % 50 == 49:
            time.sleep(0.001)

{"serve": serve, "ping": ping, "bulk": bulk, "udprecv": udprecv, "udpsend": udpsend}[mode]()
'''


class Link:
    """Two namespaces joined by a veth pair, with a measuring server in b."""

    def __init__(self):
        tag = f"lks{os.getpid()}"
        self.ns_a, self.ns_b = f"{tag}a", f"{tag}b"
        self.dev_a, self.dev_b = f"{tag}va", f"{tag}vb"
        self.addr_b = "10.215.0.2"
        self.made: list[str] = []
        self.server: subprocess.Popen | None = None

    def ends(self) -> list[tuple[str, str]]:
        """Both (namespace, interface) ends."""
        return [(self.ns_a, self.dev_a), (self.ns_b, self.dev_b)]

    def build(self) -> None:
        """Make the namespaces, the veth pair, the addresses, and start the server."""
        for ns in (self.ns_a, self.ns_b):
            sh("ip", "netns", "add", ns)
            self.made.append(ns)
        sh("ip", "link", "add", self.dev_a, "netns", self.ns_a, "type", "veth",
           "peer", "name", self.dev_b, "netns", self.ns_b)
        for ns, dev, addr in [(self.ns_a, self.dev_a, "10.215.0.1/24"),
                              (self.ns_b, self.dev_b, self.addr_b + "/24")]:
            sh("ip", "-n", ns, "addr", "add", addr, "dev", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        self.server = peer_proc(self.ns_b, "serve", PORT)
        assert self.server.stdout.readline().strip() == "ready"

    def close(self) -> None:
        """Unshape, stop the server, delete what build made."""
        for ns, dev in self.ends():
            if ns in self.made:
                shaping.unshape(ns, dev)
        if self.server is not None:
            self.server.send_signal(signal.SIGKILL)
            self.server.wait(timeout=10)
            self.server.stdout.close()
        for ns in self.made:
            sh("ip", "netns", "del", ns, check=False)

    def rtt(self, count: int = 100) -> float:
        """Median TCP round trip (s) of small messages from a to b."""
        return peer_run(self.ns_a, "ping", self.addr_b, PORT, count)["rtt"]

    def throughput(self, seconds: float = 2.0) -> float:
        """Goodput (bit/s) of a bulk TCP transfer from a to b."""
        return peer_run(self.ns_a, "bulk", self.addr_b, PORT, seconds)["rate"]

    def ceiling(self, seconds: float = 1.0) -> float:
        """Goodput (bit/s) of the same transfer over b's loopback, which no shaping touches:
        what the machine's CPU lets a Python sender push now (beside other work, far less)."""
        return peer_run(self.ns_b, "bulk", "127.0.0.1", PORT, seconds)["rate"]


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run a command, failing with its stderr."""
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if check and done.returncode:
        raise RuntimeError(f"`{' '.join(argv)}` failed: {done.stderr.strip()}")
    return done


def peer_argv(ns: str, mode: str, *args) -> list[str]:
    """Command line running the PEER program in namespace ns."""
    return ["ip", "netns", "exec", ns, sys.executable, "-c", PEER, mode, *map(str, args)]


def peer_proc(ns: str, mode: str, *args) -> subprocess.Popen:
    """Start the PEER program in the background (stdout piped)."""
    return subprocess.Popen(peer_argv(ns, mode, *args), stdout=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)


def peer_run(ns: str, mode: str, *args) -> dict:
    """Run the PEER program to completion and return its JSON output."""
    return json.loads(sh(*peer_argv(ns, mode, *args)).stdout)


def require_shaping() -> None:
    """Skip (or fail, under LABKIT_REQUIRE_MULTIHOST=1) where shaping cannot run."""
    missing = shaping.missing_tools()
    if missing:
        skip_or_fail("link shaping tests need " + ", ".join(missing))


@pytest.fixture(scope="module")
def link():
    """A fresh veth link between two namespaces of this process, removed afterwards."""
    require_shaping()
    made = Link()
    try:
        made.build()
        yield made
    finally:
        made.close()
    assert not any(ns in sh("ip", "netns", "list").stdout for ns in made.made)


@pytest.fixture(scope="module")
def baseline(link):
    """Unshaped (rtt s, throughput bit/s)."""
    return link.rtt(), link.throughput(1.0)


def assert_clean(link: Link) -> None:
    """No delayer, rule or tbf of ours is left on either end."""
    for ns, dev in link.ends():
        assert shaping.delayer_pids(ns, dev) == []
        assert shaping.COMMENT not in sh("ip", "netns", "exec", ns, "iptables-legacy",
                                         "-t", "mangle", "-S").stdout
        assert "tbf" not in sh("tc", "-n", ns, "qdisc", "show", "dev", dev).stdout


def unshaped_floor(link: Link, shaped_rate: float) -> float:
    """The goodput an unshaped link must beat: 1.3x ``shaped_rate`` (past what a tbf left at
    that rate lets through, 1.15x) where the CPU allows it now, or half the loopback's
    goodput where it does not.  Beside a second test run, a Python sender pushed 0.71 and
    0.85 Gbit/s over the unshaped link (issue 44): the CPU, not a shaping, bounded it."""
    return min(1.3 * shaped_rate, 0.5 * link.ceiling(1.0))


def test_unshaped_baseline(link, baseline):
    rtt, rate = baseline
    assert rtt < 0.001
    assert rate > unshaped_floor(link, 1e9), rate


@pytest.mark.parametrize("rate_bit, delay_s, rtt_bounds", [
    (1e9, 0.0005, (0.0008, 0.004)),
    (1e8, 0.005, (0.008, 0.020)),
])
def test_rate_and_delay_on_both_ends(link, baseline, rate_bit, delay_s, rtt_bounds):
    with shaping.shaped_links(link.ends(), rate_bit, delay_s) as done:
        assert [d["delayer_pid"] > 0 for d in done] == [True, True]
        rtt, rate = link.rtt(), link.throughput(2.0)
    assert rtt_bounds[0] < rtt < rtt_bounds[1], rtt
    assert 0.6 * rate_bit < rate < 1.15 * rate_bit, rate
    assert_clean(link)
    assert link.rtt() < max(3 * baseline[0], 0.001)
    # Past the rate that was shaped, by more than its tbf lets through (1.15x): a tbf left
    # behind would cap it there.  Not the unshaped 1.3 Gbit/s for every rate: beyond the
    # cap it is the CPU that bounds a Python sender, and beside a second test run a
    # 1e8-shaped link measured 0.55 Gbit/s once unshaped, with no tbf left (issue 44).
    # Where the CPU cannot push past 1.3x the rate now, assert_clean's look at the qdiscs
    # above is what shows no tbf stayed.
    assert link.throughput(1.0) > unshaped_floor(link, rate_bit)


def test_rate_only(link):
    with shaping.shaped(link.ns_a, link.dev_a, rate_bit=1e8) as done:
        assert "delayer_pid" not in done
        assert link.rtt() < 0.002
        assert 0.6e8 < link.throughput(2.0) < 1.15e8
    assert_clean(link)


def test_egress_delay_on_one_end(link):
    with shaping.shaped(link.ns_a, link.dev_a, delay_s=0.005, delay_on="egress"):
        assert 0.004 < link.rtt() < 0.012
    assert_clean(link)


def test_delay_keeps_packet_order(link):
    receiver = peer_proc(link.ns_b, "udprecv", UDP_PORT)
    try:
        assert receiver.stdout.readline().strip() == "ready"
        with shaping.shaped(link.ns_b, link.dev_b, delay_s=0.002):
            peer_run_quiet(link.ns_a, "udpsend", link.addr_b, UDP_PORT, 3000)
            seen = json.loads(receiver.stdout.readline())
    finally:
        receiver.kill()
        receiver.wait(timeout=10)
        receiver.stdout.close()
    assert len(seen) > 2500
    assert seen == sorted(seen)


def peer_run_quiet(ns: str, mode: str, *args) -> None:
    """Run the PEER program to completion, ignoring its output."""
    sh(*peer_argv(ns, mode, *args))


def test_traffic_flows_when_the_delayer_dies(link):
    done = shaping.shape(link.ns_b, link.dev_b, delay_s=0.005)
    try:
        os.kill(done["delayer_pid"], signal.SIGKILL)
        deadline = time.monotonic() + 10
        while shaping.delayer_pids(link.ns_b, link.dev_b) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert link.rtt() < 0.002  # --queue-bypass: no listener, no queueing
    finally:
        shaping.unshape(link.ns_b, link.dev_b)
    assert_clean(link)


def test_unshape_is_idempotent_and_shape_replaces(link):
    shaping.unshape(link.ns_a, link.dev_a)
    shaping.shape(link.ns_a, link.dev_a, 1e8, 0.001)
    shaping.shape(link.ns_a, link.dev_a, 1e9, 0.002)
    assert len(shaping.delayer_pids(link.ns_a, link.dev_a)) == 1
    rules = sh("ip", "netns", "exec", link.ns_a, "iptables-legacy", "-t", "mangle", "-S").stdout
    assert rules.count(shaping.COMMENT) == 1
    assert "1Gbit" in sh("tc", "-n", link.ns_a, "qdisc", "show", "dev", link.dev_a).stdout
    shaping.unshape(link.ns_a, link.dev_a)
    shaping.unshape(link.ns_a, link.dev_a)
    assert_clean(link)


def test_bad_arguments_change_nothing(link):
    with pytest.raises(ValueError):
        shaping.shape(link.ns_a, link.dev_a, 1e8, 0.001, delay_on="sideways")
    with pytest.raises(shaping.ShapingError):
        shaping.shape(link.ns_a, "nosuchdev0", None, 0.001)
    assert_clean(link)
