"""Which network interface a rank's process group uses, and the worker's side of the probe.

gloo and NCCL open their sockets on one interface per process.  Left alone,
gloo takes the address its host name resolves to, which on most Debian and
Ubuntu machines is ``127.0.0.1``: ranks on other hosts then try to reach each
other on their own loopback and fail only when the rendezvous times out.
labkit knows each replica's Dask worker address, so a rank binds the
interface that holds that address (``GLOO_SOCKET_IFNAME`` for gloo,
``NCCL_SOCKET_IFNAME`` for NCCL).  A variable the worker already has set is
the user's choice and is kept.

Before the process group forms, every rank opens a listening socket on the
address its backend will use and every other rank connects to it, with a
short timeout: ranks that cannot reach each other are reported in seconds
(:mod:`labkit.data_parallel.dask.reach`, the client's side of the probe),
naming the ranks, their addresses and the setting to change, instead of a
rendezvous that hangs until its timeout.

Examples
--------
>>> interface_of("127.0.0.1") is not None      # the loopback interface, "lo" on Linux
True
>>> interface_of("192.0.2.1") is None          # an address this machine does not hold
True
"""

from __future__ import annotations

import contextlib
import os
import socket
from dataclasses import dataclass

import psutil  # a dependency of distributed

from ...errors import InputError, SchedulerError

__all__ = [
    "VARIABLES",
    "Binding",
    "interface_of",
    "binding",
    "bound",
    "listen",
    "reach",
    "close_probe",
    "PROBE_TIMEOUT",
]

#: The environment variable through which each backend is told its interface.
VARIABLES = {"gloo": "GLOO_SOCKET_IFNAME", "nccl": "NCCL_SOCKET_IFNAME"}

PROBE_TIMEOUT = 5.0  # seconds a rank tries to reach a peer before calling it unreachable

_PROBES: dict = {}  # group id -> listening sockets of this worker's rank


@dataclass(frozen=True)
class Binding:
    """Where one rank's backend opens its sockets."""

    variable: str | None  # GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME, None for other backends
    interface: str | None  # the interface's name, None when none holds the address
    address: str  # the IP address peers will be told to connect to
    explicit: bool  # the worker's environment already named the interface

    def describe(self) -> str:
        """``"lo 127.0.0.1 (GLOO_SOCKET_IFNAME=lo, set on the worker)"``, for messages."""
        how = (
            ("set on the worker" if self.explicit else "chosen by labkit")
            if self.interface
            else "from the host name"
        )
        name = f"{self.interface} " if self.interface else ""
        setting = f"{self.variable}={self.interface}, " if self.interface and self.variable else ""
        return f"{name}{self.address} ({setting}{how})"


def _ip_of(host: str) -> str:
    """``host`` as an IP address (names resolved; the scope of an IPv6 address dropped)."""
    try:
        return str(socket.getaddrinfo(host, None)[0][4][0]).split("%")[0]
    except OSError:
        return host


def _addresses() -> dict[str, list[str]]:
    """Interface name -> its IPv4 and IPv6 addresses."""
    families = (socket.AF_INET, socket.AF_INET6)
    return {
        name: [a.address.split("%")[0] for a in addrs if a.family in families]
        for name, addrs in psutil.net_if_addrs().items()
    }


def interface_of(host: str) -> str | None:
    """The name of this machine's interface that holds ``host`` (an address or a name)."""
    ip = _ip_of(host)
    return next((name for name, ips in _addresses().items() if ip in ips), None)


def _address_on(interface: str) -> str | None:
    """The first address of ``interface`` (IPv4 first), or None when it has none or is absent."""
    ips = _addresses().get(interface, [])
    return next((ip for ip in ips if ":" not in ip), ips[0] if ips else None)


def binding(backend: str, worker_host: str) -> Binding:
    """Where ``backend`` will open this rank's sockets, the worker being at ``worker_host``.

    Raises
    ------
    InputError
        The worker's environment names an interface that it does not have.
    """
    variable = VARIABLES.get(backend)
    named = os.environ.get(variable, "") if variable else ""
    if named:
        interface = named.split(",")[0].lstrip("^=")
        address = _address_on(interface)
        if address is None:
            raise InputError(
                f"{variable}={named} on this worker names no interface with an "
                f"address (it has {', '.join(sorted(_addresses()))}); unset it "
                f"and labkit binds the interface of the worker's address "
                f"{worker_host}",
                argument=variable,
            )
        return Binding(variable, interface, address, True)
    holding = interface_of(worker_host)
    if holding is not None and variable:
        return Binding(variable, holding, _ip_of(worker_host), False)
    # what gloo does unaided: the address of the host name
    return Binding(variable, None, _ip_of(socket.gethostname()), False)


@contextlib.contextmanager
def bound(choice: Binding):
    """Tell the backend its interface while the process group forms.

    gloo reads its variable when the group is built, so it is put back
    afterwards; NCCL reads its own at the first collective, so that one stays
    set for the worker's life (a worker's address does not change).
    """
    variable = choice.variable
    if choice.explicit or choice.interface is None or variable is None:
        yield
        return
    os.environ[variable] = choice.interface
    try:
        yield
    finally:
        if variable == VARIABLES["gloo"]:
            os.environ.pop(variable, None)


# ---------------------------------------------------------------- the probe (worker side)


def listen(gid: str, backend: str, worker_host: str, store_host: str | None) -> dict:
    """Open this rank's probe sockets: on its backend's address, and on the store's host.

    Connections are completed by the kernel into the listen backlog, so no
    thread accepts them.  Returns what peers need: the addresses and ports.
    """
    choice = binding(backend, worker_host)
    ports: dict[str, int] = {}
    socks: list[socket.socket] = []
    for address in dict.fromkeys(a for a in (choice.address, store_host) if a):
        s = socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET)
        try:
            s.bind((address, 0))
            s.listen(128)
        except OSError as exc:
            s.close()
            for other in socks:
                other.close()
            raise SchedulerError(
                f"cannot listen on {address} for the process group ({choice.describe()}): {exc}"
            ) from None
        socks.append(s)
        ports[address] = s.getsockname()[1]
    _PROBES[gid] = socks
    return {"binding": choice, "ports": ports}


def reach(targets: list[tuple[int, str, int]], timeout: float = PROBE_TIMEOUT) -> list:
    """``(rank, address, port, error)`` for each target this rank could not connect to."""
    failed = []
    for rank, address, port in targets:
        try:
            with socket.create_connection((address, port), timeout=timeout):
                pass
        except OSError as exc:
            failed.append((rank, address, port, f"{type(exc).__name__}: {exc}"))
    return failed


def close_probe(gid: str) -> None:
    """Close this rank's probe sockets (run on every worker; idempotent)."""
    for s in _PROBES.pop(gid, []):
        s.close()
