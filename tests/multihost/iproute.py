"""``ip`` (iproute2) helpers for the namespace cluster: run it, probe the rights, pick a subnet."""

from __future__ import annotations

import functools
import ipaddress
import os
import shutil
import subprocess
from pathlib import Path


class NetnsError(RuntimeError):
    """An ``ip`` command failed, or the cluster did not come up."""


def ip(*args: str, ns: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    """Run ``ip [-n ns] args``; raise NetnsError with its stderr if it fails and check is set."""
    argv = ["ip", *(["-n", ns] if ns else []), *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if check and done.returncode:
        raise NetnsError(f"`{' '.join(argv)}` failed: {done.stderr.strip()}")
    return done


def _capabilities() -> int:
    """This process's effective capability mask."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
    return 0


@functools.lru_cache(maxsize=1)
def available() -> tuple[bool, str]:
    """(True, "") if namespaces, veths and bridges can be made here, else (False, why)."""
    if shutil.which("ip") is None:
        return False, "the `ip` command (iproute2) is not installed"
    caps = _capabilities()
    # ip netns add/exec mount (CAP_SYS_ADMIN, bit 21); links need CAP_NET_ADMIN (bit 12).
    if os.geteuid() != 0 and not (caps >> 12 & 1 and caps >> 21 & 1):
        return False, f"not root (euid {os.geteuid()}) and no CAP_NET_ADMIN + CAP_SYS_ADMIN"
    probe = f"lk{os.getpid()}probe"
    try:
        ip("netns", "add", probe)
        ip("link", "add", "name", "a", "type", "veth", "peer", "name", "b", ns=probe)
        ip("link", "add", "name", "br0", "type", "bridge", ns=probe)
    except (NetnsError, OSError, subprocess.SubprocessError) as exc:
        return False, str(exc)
    finally:
        ip("netns", "del", probe, check=False)
    return True, ""


def _used_networks() -> list[ipaddress.IPv4Network]:
    """IPv4 networks the root namespace already routes or has addresses in."""
    kinds = {"unicast", "local", "broadcast", "anycast", "multicast",
             "unreachable", "blackhole", "prohibit", "throw", "nat"}
    nets = []
    for line in ip("-o", "-4", "route", "show", "table", "all").stdout.splitlines():
        words = line.split()
        dst = words[1] if words and words[0] in kinds else (words[0] if words else "default")
        if dst != "default":  # the default route overlaps everything; it is not a collision
            nets.append(ipaddress.ip_network(dst, strict=False))
    for line in ip("-o", "-4", "addr").stdout.splitlines():
        words = line.split()
        nets.append(ipaddress.ip_interface(words[words.index("inet") + 1]).network)
    return nets


def pick_subnet() -> ipaddress.IPv4Network:
    """A free 10.213.x.0/24 (x starting from the pid, so that runs spread out)."""
    used = _used_networks()
    start = os.getpid() % 256
    for k in range(256):
        candidate = ipaddress.ip_network(f"10.213.{(start + k) % 256}.0/24")
        if not any(candidate.overlaps(net) for net in used):
            return candidate
    raise NetnsError(f"no free 10.213.x.0/24 subnet; in use: {used}")


def skip_or_fail(reason: str) -> None:
    """Skip the test for ``reason``, or fail it in CI (see :mod:`tests.system`)."""
    from tests import system
    system.skip_or_fail(reason, "run as root, with iproute2 and iptables installed "
                                "(apt-get install iproute2 iptables)")
