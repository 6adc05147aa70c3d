"""Hosts made of network namespaces, for multi-host Dask tests on one machine.

Topology (all names are unique to the creating process and object)::

    root namespace (pytest, client)      switch namespace             host namespaces
    <prefix>  10.213.N.1/24  <--veth-->  root --+
                                                br0
                                         h0 ----+  <--veth-->  eth0 10.213.N.2  (<prefix>h0)
                                         h1 ----+  <--veth-->  eth0 10.213.N.3  (<prefix>h1) ...

The bridge lives in a namespace of its own rather than in the root one: with
``br_netfilter`` loaded (it is here: ``bridge-nf-call-iptables=1``), bridged
frames go through the iptables FORWARD chain of the bridge's namespace, and a
root namespace with Docker's ``FORWARD DROP`` policy would silently drop them.
A fresh namespace has no rules, so the fixture does not depend on the
machine's firewall.  The root namespace is an end host on the bridge (no IP
forwarding needed).

Host 0 runs the scheduler; hosts 1..n each run one worker without a nanny
(killing it is the loss of that host).  UTS names and /etc/hosts are shared
with the machine on purpose: ``gethostbyname(gethostname())`` gives
127.0.0.1 on every host, as on badly configured real clusters.
"""

from __future__ import annotations

import atexit
import ctypes
import fcntl
import ipaddress
import itertools
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests.multihost.iproute import NetnsError, available, ip, pick_subnet

__all__ = ["NetnsCluster", "NetnsError", "Veth", "available"]

ROOT = Path(__file__).resolve().parents[2]
LOCK_FILE = Path(tempfile.gettempdir()) / "labkit-multihost.lock"
_counter = itertools.count()
_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


@dataclass(frozen=True)
class Veth:
    """The two ends of a host's link: (namespace, interface) on each side."""

    host_ns: str | None  # None: the root namespace
    host_if: str
    switch_ns: str
    switch_if: str


def _die_with_parent() -> None:
    """In the child before exec: get SIGKILL if pytest dies, so a crash leaves no server."""
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def child_env() -> dict[str, str]:
    """Environment for the servers: repo on PYTHONPATH, one thread each, no socket pinning."""
    env = dict(os.environ)
    # Unset on purpose: the hosts must find their interface by themselves (the bug under test).
    for name in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"):
        env.pop(name, None)
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(ROOT)]
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *rest])
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    return env


class NetnsCluster:
    """A scheduler host and ``n_workers`` worker hosts, each a network namespace."""

    def __init__(self, n_workers: int = 2, *, scheduler_port: int = 8786,
                 dashboard_port: int = 8787, start_timeout: float = 90.0,
                 worker_env: dict[str, str] | None = None):
        self.n_workers = n_workers
        self.worker_env = dict(worker_env or {})   # e.g. a wrong GLOO_SOCKET_IFNAME, by hand
        self.scheduler_port = scheduler_port
        self.dashboard_port = dashboard_port
        self.start_timeout = start_timeout
        self.prefix = f"lk{os.getpid()}x{next(_counter)}"  # <= 15 chars: also a link name
        self.switch_ns = f"{self.prefix}sw"
        self.root_if = self.prefix
        self.subnet: ipaddress.IPv4Network | None = None
        self.namespaces: list[str] = []  # created so far, for close()
        self.links: list[str] = []  # root-namespace links created so far
        self.procs: dict[int, subprocess.Popen] = {}  # host -> its server
        self.killed: set[int] = set()
        self.workers: dict[int, str] = {}  # host -> worker address, once registered
        self.tmpdir = tempfile.mkdtemp(prefix=f"labkit-multihost-{self.prefix}-")
        self._closed = False
        atexit.register(self.close)

    # -- names and addresses -------------------------------------------------

    @property
    def hosts(self) -> range:
        """Host indices: 0 is the scheduler's, 1..n_workers the workers'."""
        return range(self.n_workers + 1)

    def namespace(self, host: int) -> str:
        """The network namespace of a host."""
        return f"{self.prefix}h{host}"

    def address(self, host: int) -> str:
        """A host's IPv4 address (the root namespace holds .1)."""
        return str(self.subnet.network_address + 2 + host)

    @property
    def gateway(self) -> str:
        """The root namespace's address on the bridge."""
        return str(self.subnet.network_address + 1)

    def veth(self, host: int) -> Veth:
        """A host's link: ``eth0`` in its namespace, ``h<host>`` on the bridge."""
        return Veth(self.namespace(host), "eth0", self.switch_ns, f"h{host}")

    def root_veth(self) -> Veth:
        """The root namespace's link to the bridge (host_ns None: the root namespace)."""
        return Veth(None, self.root_if, self.switch_ns, "root")

    @property
    def scheduler_address(self) -> str:
        """``tcp://ADDR:PORT`` of the scheduler on host 0."""
        return f"tcp://{self.address(0)}:{self.scheduler_port}"

    @property
    def dashboard_address(self) -> str:
        """``http://ADDR:PORT`` of the scheduler's dashboard."""
        return f"http://{self.address(0)}:{self.dashboard_port}"

    def worker_address(self, host: int) -> str:
        """The address the worker on ``host`` registered with."""
        return self.workers[host]

    def log(self, host: int) -> Path:
        """The log file of a host's server."""
        return Path(self.tmpdir) / f"host{host}.log"

    def pids(self) -> dict[int, int]:
        """host -> pid of every server started (running or not)."""
        return {host: proc.pid for host, proc in self.procs.items()}

    # -- network -------------------------------------------------------------

    def _add_netns(self, name: str) -> None:
        """Create a namespace with lo up, remembering it for close()."""
        ip("netns", "add", name)
        self.namespaces.append(name)
        ip("link", "set", "lo", "up", ns=name)

    def build_network(self) -> None:
        """Create the switch, the host namespaces and their links."""
        # The lock keeps two concurrent runs from picking the same subnet before
        # either has routed it.
        with open(LOCK_FILE, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            self.subnet = pick_subnet()
            self._add_netns(self.switch_ns)
            ip("link", "add", "name", "br0", "type", "bridge", ns=self.switch_ns)
            ip("link", "add", "name", self.root_if, "type", "veth", "peer", "name", "root",
               "netns", self.switch_ns)
            self.links.append(self.root_if)
            ip("addr", "add", f"{self.gateway}/{self.subnet.prefixlen}", "dev", self.root_if)
            ip("link", "set", self.root_if, "up")
        for host in self.hosts:
            link, ns = self.veth(host), self.namespace(host)
            self._add_netns(ns)
            # Both ends are created directly in their namespaces: no name clash in the root one.
            ip("link", "add", "name", link.host_if, "netns", ns, "type", "veth",
               "peer", "name", link.switch_if, "netns", self.switch_ns)
            ip("addr", "add", f"{self.address(host)}/{self.subnet.prefixlen}",
               "dev", link.host_if, ns=ns)
            ip("link", "set", link.host_if, "up", ns=ns)
            ip("link", "set", link.switch_if, "master", "br0", "up", ns=self.switch_ns)
        ip("link", "set", "root", "master", "br0", "up", ns=self.switch_ns)
        ip("link", "set", "br0", "up", ns=self.switch_ns)

    def run_in(self, host: int, argv: list[str], timeout: float = 60,
               **kwargs) -> subprocess.CompletedProcess:
        """Run a command inside a host's namespace; output captured as text."""
        return subprocess.run(["ip", "netns", "exec", self.namespace(host), *argv],
                              capture_output=True, text=True, timeout=timeout,
                              env=child_env(), **kwargs)

    # -- servers -------------------------------------------------------------

    def _spawn(self, host: int, argv: list[str], env: dict | None = None) -> subprocess.Popen:
        """Start a server in a host's namespace, output to its log."""
        if host in self.procs and self.procs[host].poll() is None:
            raise NetnsError(f"host {host} already runs pid {self.procs[host].pid}")
        with open(self.log(host), "ab") as log:
            # `ip netns exec` execs the command (no fork), so the pid is the server's.
            proc = subprocess.Popen(["ip", "netns", "exec", self.namespace(host), *argv],
                                    stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, env={**child_env(), **(env or {})},
                                    cwd=self.tmpdir, preexec_fn=_die_with_parent)
        self.procs[host] = proc
        self.killed.discard(host)
        return proc

    def start_scheduler(self, host: int = 0) -> subprocess.Popen:
        """Start ``dask scheduler`` on a host, bound to its address."""
        addr = self.address(host)
        return self._spawn(host, [
            sys.executable, "-m", "distributed.cli.dask_scheduler",
            "--host", addr, "--port", str(self.scheduler_port),
            "--dashboard-address", f"{addr}:{self.dashboard_port}"])

    def start_worker(self, host: int, wait: bool = False) -> subprocess.Popen:
        """Start a nanny-less single-thread ``dask worker`` named ``host<N>`` on a host."""
        proc = self._spawn(host, [
            sys.executable, "-m", "distributed.cli.dask_worker", self.scheduler_address,
            "--host", self.address(host), "--nthreads", "1", "--no-nanny",
            "--name", f"host{host}", "--memory-limit", "0", "--no-dashboard",
            "--local-directory", str(Path(self.tmpdir) / f"host{host}"),
            # A worker whose scheduler is gone for a minute exits by itself.
            "--death-timeout", "60"], env=self.worker_env)
        if wait:
            self.wait_ready([host])
        return proc

    def kill_worker(self, host: int) -> None:
        """SIGKILL the worker on a host (the host is lost) and reap it."""
        proc = self.procs[host]
        self.killed.add(host)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)

    def tails(self, lines: int = 25) -> str:
        """The last lines of every server's log, for failure messages."""
        parts = []
        for host in sorted(self.procs):
            try:
                text = self.log(host).read_text(errors="replace").splitlines()[-lines:]
            except OSError as exc:
                text = [f"(no log: {exc})"]
            parts.append(f"--- host{host} ({self.namespace(host)}, pid {self.procs[host].pid},"
                         f" exit {self.procs[host].poll()}) ---\n" + "\n".join(text))
        return "\n".join(parts)

    def _check_alive(self) -> None:
        """Raise with the logs if a server that should run has exited."""
        for host, proc in self.procs.items():
            if host not in self.killed and proc.poll() is not None:
                raise NetnsError(f"host{host}'s server exited with {proc.returncode}\n"
                                 + self.tails())

    def _scheduler_listens(self) -> bool:
        """Whether the scheduler port accepts connections from the root namespace."""
        try:
            with socket.create_connection((self.address(0), self.scheduler_port), timeout=1):
                return True
        except OSError:
            return False

    def wait_ready(self, hosts: list[int] | None = None, timeout: float | None = None) -> None:
        """Wait until the scheduler answers and the workers on ``hosts`` are registered."""
        from distributed import Client
        hosts = list(self.hosts[1:] if hosts is None else hosts)
        deadline = time.monotonic() + (timeout or self.start_timeout)
        while not self._scheduler_listens():
            self._check_alive()
            if time.monotonic() > deadline:
                raise NetnsError(f"scheduler at {self.scheduler_address} not listening\n"
                                 + self.tails())
            time.sleep(0.25)
        wanted = {f"host{h}": h for h in hosts}
        try:
            with Client(self.scheduler_address, timeout=max(deadline - time.monotonic(), 5),
                        set_as_default=False) as client:
                while True:
                    seen = {str(w["name"]): addr
                            for addr, w in client.scheduler_info(n_workers=-1)["workers"].items()}
                    if set(wanted) <= set(seen):
                        break
                    self._check_alive()
                    if time.monotonic() > deadline:
                        raise NetnsError(f"workers {sorted(set(wanted) - set(seen))} did not "
                                         f"register (registered: {seen})\n" + self.tails())
                    time.sleep(0.25)
        except (OSError, TimeoutError) as exc:
            raise NetnsError(f"no client connection to {self.scheduler_address}: {exc!r}\n"
                             + self.tails()) from exc
        self.workers.update({h: seen[name] for name, h in wanted.items()})

    def start(self) -> "NetnsCluster":
        """Build the network, start scheduler and workers, wait until all are registered."""
        try:
            self.build_network()
            self.start_scheduler(0)
            for host in self.hosts[1:]:  # workers retry until the scheduler listens
                self.start_worker(host)
            self.wait_ready()
        except BaseException:
            self.close()
            raise
        return self

    def client(self, **kwargs):
        """A new ``distributed.Client`` on this cluster from the root namespace (caller closes)."""
        from distributed import Client
        kwargs.setdefault("timeout", 30)
        kwargs.setdefault("set_as_default", False)
        return Client(self.scheduler_address, **kwargs)

    # -- teardown ------------------------------------------------------------

    def _stop_processes(self, grace: float = 10.0) -> None:
        """SIGTERM the workers, then the scheduler, ``grace`` seconds each; then SIGKILL; reap."""
        # Workers first: a worker that gets SIGTERM while the closing scheduler
        # also tells it to close can hang in its close (seen with distributed 2026.8).
        workers = [p for h, p in self.procs.items() if h != 0]
        for group in (workers, [self.procs[0]] if 0 in self.procs else []):
            running = [p for p in group if p.poll() is None]
            for proc in running:
                proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + grace
            for proc in running:
                try:
                    proc.wait(timeout=max(deadline - time.monotonic(), 0.01))
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)

    def close(self) -> None:
        """Stop the servers, delete links and namespaces, remove temp files (idempotent)."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        errors = []
        try:
            self._stop_processes()
        except Exception as exc:  # keep tearing down the rest
            errors.append(repr(exc))
        # Deleting the root end first is synchronous; a namespace's links vanish
        # with it, but namespace cleanup in the kernel is deferred.
        for link in self.links:
            done = ip("link", "del", link, check=False)
            if done.returncode and "Cannot find device" not in done.stderr:
                errors.append(done.stderr.strip())
        for name in reversed(self.namespaces):
            done = ip("netns", "del", name, check=False)
            if done.returncode and "No such file" not in done.stderr:
                errors.append(done.stderr.strip())
        shutil.rmtree(self.tmpdir, ignore_errors=True)
        if errors:
            raise NetnsError(f"closing {self.prefix}: " + "; ".join(errors))

    def __enter__(self) -> "NetnsCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()
