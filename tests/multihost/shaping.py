"""Shape a network interface inside a namespace: rate limit and added latency, without netem.

This kernel has no ``netem`` (nor fq/etf, nor police/bpf actions), so:

* **Rate** is a ``tbf`` root qdisc on the interface's egress.  GSO/TSO stay on:
  tbf charges a GSO packet for all its segments' bytes (and splits one larger
  than the burst), measured within 5 % of the rate at 1 Gbit/s and 100 Mbit/s,
  and big GSO packets keep the delayer's packet rate (hence its CPU) low.
* **Latency** is an NFQUEUE delayer (``nfqdelay.py``, pure Python): an
  iptables-legacy rule (``--queue-bypass``: traffic flows unqueued if the
  delayer is gone) sends the interface's packets to a queue, the delayer holds
  each for ``delay_s`` in FIFO order and accepts it.  By default it delays the
  packets the interface **receives** (mangle PREROUTING), not those it sends:
  a packet held on its sender's egress is still charged to its TCP socket, and
  TCP small queues then cap a bulk transfer at a few Mbit/s (measured 9 Mbit/s
  at 5 ms); on ingress the kernel has already orphaned the packet.  Shape both
  ends of a link and each direction gets ``delay_s`` once: RTT grows by
  ``2 * delay_s``, as with egress delay on both ends.  ``delay_on="egress"``
  (mangle POSTROUTING) is there for forwarded traffic (router namespaces).

Everything is found again from the namespace itself (tc qdisc, rules tagged by
comment, delayer processes tagged on their command line), so ``unshape`` is
idempotent and works from another process than ``shape``.  IPv4 always;
IPv6 too when ``ip6tables-legacy`` is installed.

Example::

    with shaped("ns1", "eth0", rate_bit=100e6, delay_s=0.005):
        ...  # 100 Mbit/s out of eth0, packets into eth0 held 5 ms
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

DELAYER = Path(__file__).resolve().with_name("nfqdelay.py")
COMMENT = "labkit-shaping"
TOOLS = {"ip": "iproute2", "tc": "iproute2", "iptables-legacy": "iptables"}
OPTIONAL_TOOLS = {"ip6tables-legacy": "iptables"}
READY_TIMEOUT_S = 15
_started: dict[int, subprocess.Popen] = {}  # delayers this process started, to reap them


class ShapingError(RuntimeError):
    """A shaping command failed, or the tools or privileges are missing."""


def missing_tools(delay: bool = True) -> list[str]:
    """What shaping needs and lacks here: root, commands (with their Debian package)."""
    missing = [] if os.geteuid() == 0 else [f"root (euid is {os.geteuid()})"]
    needed = dict(TOOLS) if delay else {k: v for k, v in TOOLS.items() if k != "iptables-legacy"}
    missing += [f"`{cmd}` (Debian package {pkg})" for cmd, pkg in needed.items()
                if shutil.which(cmd) is None]
    return missing


def ensure_tools(delay: bool = True) -> None:
    """Raise ShapingError naming everything missing for shaping (delay too, if delay)."""
    missing = missing_tools(delay)
    if missing:
        raise ShapingError("link shaping needs " + ", ".join(missing))


def run(netns: str | None, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run argv inside netns (None: this namespace); raise ShapingError if it fails and check."""
    full = [*(["ip", "netns", "exec", netns] if netns else []), *argv]
    done = subprocess.run(full, capture_output=True, text=True, timeout=30)
    if check and done.returncode:
        raise ShapingError(f"`{' '.join(full)}` failed: {done.stderr.strip()}")
    return done


def tbf_sizes(rate_bit: float) -> tuple[int, int]:
    """(burst, limit) in bytes for a tbf at rate_bit: 1 ms of burst, 10 ms of queue, sane floors."""
    per_ms = int(rate_bit / 8 / 1000)
    burst = max(per_ms, 16 * 1024)
    limit = burst + max(10 * per_ms, 96 * 1024)  # room for a whole 64 KiB GSO packet
    return burst, limit


def set_rate(netns: str | None, dev: str, rate_bit: float) -> None:
    """Put a tbf at rate_bit on dev's egress (replacing its root qdisc)."""
    burst, limit = tbf_sizes(rate_bit)
    run(netns, "tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", f"{int(rate_bit)}bit",
        "burst", str(burst), "limit", str(limit))


def clear_rate(netns: str | None, dev: str) -> None:
    """Remove our tbf from dev (only a tbf root qdisc; nothing if there is none)."""
    shown = run(netns, "tc", "qdisc", "show", "dev", dev, "root", check=False).stdout
    if shown.startswith("qdisc tbf "):
        run(netns, "tc", "qdisc", "del", "dev", dev, "root", check=False)


def ifindex(netns: str | None, dev: str) -> int:
    """dev's interface index in netns."""
    shown = run(netns, "ip", "-j", "link", "show", "dev", dev).stdout
    return int(json.loads(shown)[0]["ifindex"])


def tag(netns: str | None, dev: str) -> str:
    """The tag naming (netns, dev) on delayer command lines and in rule comments."""
    return f"{netns or '-'}/{dev}"


def iptables_commands() -> list[str]:
    """The iptables-legacy commands present (IPv4 always needed, IPv6 if installed)."""
    return [cmd for cmd in ("iptables-legacy", "ip6tables-legacy") if shutil.which(cmd)]


def rule(dev: str, queue: int, delay_on: str) -> list[str]:
    """The mangle rule sending dev's packets (received or sent) to queue."""
    if delay_on not in ("ingress", "egress"):
        raise ValueError(f"delay_on must be 'ingress' or 'egress', not {delay_on!r}")
    where = ["PREROUTING", "-i", dev] if delay_on == "ingress" else ["POSTROUTING", "-o", dev]
    return [*where, "-m", "comment", "--comment", f"{COMMENT}:{dev}",
            "-j", "NFQUEUE", "--queue-num", str(queue), "--queue-bypass"]


def add_rules(netns: str | None, dev: str, queue: int, delay_on: str) -> None:
    """Append the queueing rule for dev (IPv4 and, when possible, IPv6)."""
    for cmd in iptables_commands():
        run(netns, cmd, "-w", "-t", "mangle", "-A", *rule(dev, queue, delay_on))


def clear_rules(netns: str | None, dev: str) -> None:
    """Delete every mangle rule of ours for dev, whatever its queue or chain."""
    mark = ["--comment", f"{COMMENT}:{dev}"]
    for cmd in iptables_commands():
        listed = run(netns, cmd, "-w", "-t", "mangle", "-S", check=False).stdout
        for words in map(shlex.split, listed.splitlines()):
            if words[:1] == ["-A"] and _contains(words, mark):
                run(netns, cmd, "-w", "-t", "mangle", "-D", *words[1:], check=False)


def start_delayer(netns: str | None, dev: str, queue: int, delay_s: float,
                  watch_pid: int | None) -> int:
    """Start the delayer for queue inside netns; return its pid once it has bound the queue."""
    argv = [*(["ip", "netns", "exec", netns] if netns else []), sys.executable, str(DELAYER),
            str(queue), repr(float(delay_s)), "--watch", str(watch_pid or 0),
            f"--tag={tag(netns, dev)}"]   # one word: a tag may start with "-"
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True)
    _started[proc.pid] = proc
    ready, _, _ = select.select([proc.stdout], [], [], READY_TIMEOUT_S)
    line = proc.stdout.readline() if ready else ""  # "ready", or "" if it died first
    if not ready:
        proc.kill()
    proc.stdout.close()
    if line.strip() != "ready":
        proc.wait(timeout=10)
        err = proc.stderr.read().strip()
        proc.stderr.close()
        _started.pop(proc.pid, None)
        raise ShapingError(f"the delayer for {tag(netns, dev)} did not start: {err}")
    proc.stderr.close()
    return proc.pid


def delayer_pids(netns: str | None, dev: str) -> list[int]:
    """Pids of running delayers tagged for (netns, dev)."""
    want = [f"--tag={tag(netns, dev)}"]
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if any(a.endswith("nfqdelay.py") for a in argv) and _contains(argv, want):
            found.append(int(entry.name))
    return found


def _contains(argv: list[str], part: list[str]) -> bool:
    """Whether part occurs in argv as consecutive items."""
    return any(argv[i:i + len(part)] == part for i in range(len(argv) - len(part) + 1))


def stop_delayer(pid: int, grace: float = 3.0) -> None:
    """End one delayer by pid: SIGTERM (it releases what it holds), SIGKILL after grace."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    proc = _started.pop(pid, None)
    if proc is not None:
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        return
    deadline = time.monotonic() + grace
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def reap() -> None:
    """Forget (and reap) the delayers this process started that have exited."""
    for pid, proc in list(_started.items()):
        if proc.poll() is not None:
            del _started[pid]


def shape(netns: str | None, dev: str, rate_bit: float | None = None,
          delay_s: float | None = None, *, delay_on: str = "ingress",
          watch_pid: int | None = None) -> dict:
    """Shape dev in netns (None: this namespace), replacing any shaping of ours there.

    rate_bit limits what dev sends (tbf); delay_s holds what dev receives
    (delay_on="ingress") or sends ("egress") that long.  The delayer exits by
    itself when process watch_pid does (default: this process; 0: never).
    Returns what was done, e.g. {"rate_bit": 1e8, "delay_s": 0.005, "delayer_pid": 123}.
    """
    ensure_tools(delay=bool(delay_s))
    rule(dev, 0, delay_on)  # validates delay_on before anything is changed
    unshape(netns, dev)
    done: dict = {"netns": netns, "dev": dev, "rate_bit": rate_bit, "delay_s": delay_s}
    try:
        if rate_bit:
            set_rate(netns, dev, rate_bit)
        if delay_s:
            queue = ifindex(netns, dev) & 0xFFFF
            watch = os.getpid() if watch_pid is None else watch_pid
            done["delayer_pid"] = start_delayer(netns, dev, queue, delay_s, watch)
            add_rules(netns, dev, queue, delay_on)
            done.update(queue=queue, delay_on=delay_on)
    except BaseException:
        unshape(netns, dev)
        raise
    return done


def unshape(netns: str | None, dev: str) -> None:
    """Remove our shaping of dev in netns: rules, delayer, tbf; nothing to do is fine."""
    if shutil.which("iptables-legacy"):
        clear_rules(netns, dev)
    for pid in delayer_pids(netns, dev):
        stop_delayer(pid)
    reap()
    if shutil.which("tc"):
        clear_rate(netns, dev)


@contextlib.contextmanager
def shaped(netns: str | None, dev: str, rate_bit: float | None = None,
           delay_s: float | None = None, **kwargs):
    """Context manager: shape(...) on entry, unshape on exit; yields shape's result."""
    done = shape(netns, dev, rate_bit, delay_s, **kwargs)
    try:
        yield done
    finally:
        unshape(netns, dev)


@contextlib.contextmanager
def shaped_links(ends, rate_bit: float | None = None, delay_s: float | None = None, **kwargs):
    """Context manager shaping every (netns, dev) in ends alike; yields their shape results."""
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(shaped(ns, dev, rate_bit, delay_s, **kwargs))
               for ns, dev in ends]
