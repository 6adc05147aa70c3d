"""Reaching a cluster: checking an address or a client, and connecting in bounded time.

Dask's own client waits 30 s for a scheduler that is not there and then
raises a chain of ``OSError``\\ s from deep inside its event loop; a string
where a client belongs fails later with an ``AttributeError``.  Here each of
those is one :class:`~labkit.errors.InputError` or
:class:`~labkit.errors.SchedulerError` naming the address, raised at once (a
malformed address, a wrong client) or within ``connect_timeout`` seconds (a
scheduler that does not answer): :data:`CONNECT_TIMEOUT` by default, or the
``LABKIT_CONNECT_TIMEOUT`` environment variable.

Examples
--------
>>> check_address("tcp://10.0.0.5:8786")
'tcp://10.0.0.5:8786'
>>> check_address("not an address")
Traceback (most recent call last):
...
labkit.errors.InputError: address must be a Dask scheduler address (a str) such as 'tcp://host:port', e.g. 'tcp://127.0.0.1:8786'; got 'not an address' (str) [argument address]
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import time

from ...constraints import POSITIVE_INT, InstanceOf, Satisfies, check_argument
from ...errors import InputError, SchedulerError
from ..tasks.pickling import cause_chain, pickling_cause
from .dask_adapter import scheduler_identity

__all__ = [
    "CONNECT_TIMEOUT",
    "SCATTER_TIMEOUT",
    "check_address",
    "check_client",
    "check_limit",
    "connect_timeout",
    "connect",
    "on_loopback",
    "is_loopback_host",
    "scheduler_identity",
    "scatter_everywhere",
    "cancel_futures",
    "is_address",
    "is_seconds",
    "SECONDS",
    "ADDRESS",
    "CLIENT",
    "CLUSTER",
    "WORKERS",
    "check_cluster",
]

#: Seconds to wait for a scheduler that does not answer, unless told otherwise.
CONNECT_TIMEOUT = 10.0

#: A failed try's reason when its exception chain says nothing more (it ran out of time).
_NO_ANSWER = "no answer"

#: Seconds one attempt to copy something to every worker may take before it is
#: given up and tried again without the workers that did not answer.
SCATTER_TIMEOUT = 10.0

#: The rule of a timeout: a positive, finite number of seconds (or a string of one).
SECONDS = Satisfies(lambda value: is_seconds(value), "a positive, finite number of seconds")

# Schemes whose location is host:port (Dask's tcp and tls, and their IPv6 forms).
_HOST_PORT = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.\-]+):(\d+)$")


def is_address(address) -> bool:
    """Whether ``address`` looks like a Dask scheduler's address.

    ``host:port`` without a scheme is Dask's TCP.  Other schemes (``inproc``,
    ``ucx``, ...) are left to Dask to judge.
    """
    if not isinstance(address, str):
        return False
    scheme, _, location = address.rpartition("://")
    if scheme in ("", "tcp", "tls"):
        match = _HOST_PORT.match(location)
        return match is not None and 0 < int(match.group(2)) < 65536
    return True


#: The rule of a scheduler address.
ADDRESS = Satisfies(
    is_address,
    "a Dask scheduler address (a str) such as 'tcp://host:port', e.g. 'tcp://127.0.0.1:8786'",
)


def check_address(address) -> str:
    """``address`` if it looks like a Dask scheduler's address, else an ``InputError``."""
    return check_argument("address", address, [ADDRESS])


#: The rule of a client (a cluster by address is passed first, not as ``client=``).
#: The rule of a list of worker addresses (``DaskScheduler(workers=...)``).
WORKERS = Satisfies(
    lambda value: isinstance(value, (list, tuple)) and all(isinstance(a, str) for a in value),
    "a list of worker addresses (str)",
)

CLIENT = InstanceOf(
    "distributed.Client",
    "a distributed.Client (to reach a cluster by "
    "address, pass it first: "
    "lk.DaskScheduler('tcp://host:8786'))",
)


#: The rule of ``cluster=``: any cluster of Dask's deployment family.
CLUSTER = InstanceOf(
    "distributed.deploy.Cluster",
    "a distributed.deploy.Cluster (a LocalCluster, dask_jobqueue's SLURMCluster, "
    "dask_kubernetes' KubeCluster, ...)",
)


def check_cluster(cluster):
    """``cluster`` if it is a ``distributed.deploy.Cluster`` not closed, else a labkit error."""
    check_argument("cluster", cluster, [CLUSTER])
    status = getattr(cluster.status, "name", str(cluster.status))
    if status in ("closing", "closed", "failed"):
        raise SchedulerError(f"the cluster given is {status}; start a new one", argument="cluster")
    return cluster


def check_client(client):
    """``client`` if it is an open ``distributed.Client``, else a labkit error."""
    check_argument("client", client, [CLIENT])
    if client.status in ("closing", "closed"):
        raise SchedulerError(
            f"the client given is {client.status}; open a new one", argument="client"
        )
    return client


def on_loopback(addresses) -> bool:
    """Whether every Dask address is on this machine's loopback (or in this process).

    >>> on_loopback(["tcp://127.0.0.1:4000", "inproc://10.0.0.5/1/2", "tcp://localhost:1"])
    True
    >>> on_loopback(["tcp://127.0.0.1:4000", "tcp://10.0.0.5:4000"])
    False
    """
    from distributed.comm import get_address_host

    def local(address: str) -> bool:
        return address.startswith("inproc://") or is_loopback_host(get_address_host(address))

    return all(map(local, addresses))


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (an IP address or a name) is this machine's loopback.

    >>> is_loopback_host("127.0.0.1"), is_loopback_host("::1"), is_loopback_host("localhost")
    (True, True, True)
    >>> is_loopback_host("10.0.0.5"), is_loopback_host("node-3")
    (False, False)
    """
    import ipaddress

    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def check_limit(name: str, value, allow_none: bool = True) -> None:
    """An ``InputError`` unless ``value`` is a positive int (or ``None`` where allowed)."""
    check_argument(name, value, [POSITIVE_INT, None] if allow_none else [POSITIVE_INT])


def is_seconds(value) -> bool:
    """Whether ``value`` reads as a positive, finite number of seconds.

    >>> is_seconds(2.5), is_seconds("10"), is_seconds(0), is_seconds(float("inf"))
    (True, True, False, False)
    """
    if isinstance(value, bool):
        return False
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return False
    # inf: Dask would report a refusal as "within inf s"
    return 0 < seconds < float("inf")


def connect_timeout(value=None) -> float:
    """The seconds to wait for a scheduler: ``value``, the environment's, or the default."""
    if value is None:
        value = os.environ.get("LABKIT_CONNECT_TIMEOUT", CONNECT_TIMEOUT)
    check_argument("connect_timeout", value, [SECONDS])
    return float(value)


def connect(address: str, timeout=None):
    """A ``distributed.Client`` of the scheduler at ``address``, or a ``SchedulerError``.

    The error comes within ``timeout`` seconds (see :func:`connect_timeout`)
    and names the address; Dask's exception chain stays its ``__cause__``.
    A handshake that another client's message crossed (see
    :class:`.labkit_client.CrossedHandshake`) is tried again while time is left,
    each try given what is left: the timeout bounds the whole call.
    """
    from .labkit_client import CrossedHandshake, LabkitClient  # distributed, when needed

    address, seconds = check_address(address), connect_timeout(timeout)
    deadline = time.monotonic() + seconds
    crossed: CrossedHandshake | None = None
    while True:
        try:
            return LabkitClient(address, timeout=deadline - time.monotonic())
        except CrossedHandshake as exc:
            crossed = exc
            if time.monotonic() < deadline:
                continue
            reason: str = str(exc)
            cause: BaseException = exc
        except Exception as exc:
            reason, cause = _reason(exc), exc
            if crossed is not None and reason == _NO_ANSWER:
                # the scheduler did answer, crossed each time; only the last try ran out
                reason = str(crossed)
        raise SchedulerError(
            f"cannot reach a Dask scheduler at {address} within {seconds:g} s ({reason}); "
            f"check that it runs and that this machine can reach it, or wait longer "
            f"(connect_timeout=, LABKIT_CONNECT_TIMEOUT)",
            address=address,
        ) from cause


def _reason(exc: BaseException | None) -> str:
    """The most telling words of the chain: 'Connection refused' rather than 'Timed out'."""
    for err in reversed(cause_chain(exc)):  # innermost first
        if isinstance(err, ConnectionError) and str(err):
            return f"{type(err).__name__}: {err}"
    return _NO_ANSWER


def scatter_everywhere(
    client, obj, what, attempts: int = 4, timeout: float = SCATTER_TIMEOUT, only=None, key=None
):
    """A future of ``obj`` on every live worker (of ``only``, if given); a dying one is left out.

    Dask's broadcast scatter fails at once (``CommClosedError``) or waits
    forever when a worker dies under it (its scheduler loses the key half-way
    and never answers).  Here each attempt sends ``obj`` to one worker the
    scheduler lists as alive, with a deadline, and then has it copied to the
    others, with a deadline too: a lost worker costs a retry of the first
    part, and only the copies of the second (a worker that lacks one fetches
    it from a peer when a task needs it), never the run.  After ``attempts``
    failures, a :class:`~labkit.errors.SchedulerError` naming ``what`` and the
    last reason; something that cannot be pickled is an ``InputError`` at once.
    Its key is ``key`` where given (each attempt's scatter names the data so).
    """
    last: BaseException | None = None
    for attempt in range(attempts):
        if client.status in ("closing", "closed"):
            break
        try:
            workers = _live_workers(client, timeout, only)
            data = obj if key is None else {key: obj}
            future = _on_loop(
                client,
                client.scatter(data, workers=workers, hash=False, asynchronous=True),
                timeout,
            )
            if key is not None:
                future = future[key]
        except Exception as exc:  # CommClosedError, OSError, TimeoutError, no workers
            cause = pickling_cause(exc)
            if cause is not None:  # no retry makes it picklable
                raise InputError(
                    f"{_named(what)} cannot be sent to the workers: {type(cause).__name__}: {cause}"
                ) from exc
            last = exc
            time.sleep(min(0.1 * 2**attempt, 1.0))  # the scheduler notices the death
            continue
        if len(workers) > 1:
            # a worker that dies meanwhile misses its copy: those that need it fetch it
            with contextlib.suppress(Exception):
                _on_loop(client, client.replicate([future], asynchronous=True), timeout)
        return future
    reason = (
        f"{type(last).__name__}: {last}" if last is not None else f"the client is {client.status}"
    )
    raise SchedulerError(f"could not ship {_named(what)} to the workers ({reason})") from last


def cancel_futures(client, futures: list, timeout: float = SCATTER_TIMEOUT) -> None:
    """Cancel ``futures`` on the cluster, giving up after ``timeout`` s; never raises.

    Nothing is asked of a client that was closed: the scheduler let go of its
    keys when it left.  Dask's own ``cancel`` on a client closed meanwhile waits
    for an answer that never comes (a run cut short so waited for ever).
    """
    if not futures or client.status != "running":
        return
    with contextlib.suppress(Exception):  # the cluster may already be gone at shutdown
        _on_loop(client, client.cancel(futures, asynchronous=True), timeout)


def _named(what) -> str:
    """``what`` names the object: a string, or a function making one (only if needed)."""
    return what() if callable(what) else str(what)


def _live_workers(client, timeout: float, only=None) -> list[str]:
    """The workers the scheduler lists as alive (of ``only``); waits up to ``timeout`` s for one.

    Right after every worker died (a nanny restarts each within seconds) the
    list is empty for a while: waiting for a worker, rather than failing the
    attempt, ships to the new one.
    """
    deadline = time.monotonic() + timeout
    while True:
        workers = list(scheduler_identity(client).get("workers", {}))
        if only is not None:
            workers = [w for w in workers if w in only]
        if workers:
            return workers
        if time.monotonic() >= deadline or client.status in ("closing", "closed"):
            raise SchedulerError(f"the cluster has no workers (none came within {timeout:g} s)")
        time.sleep(0.1)


def _on_loop(client, coro, timeout: float):
    """The result of ``coro`` run on the client's event loop, abandoned after ``timeout`` s."""
    done = asyncio.run_coroutine_threadsafe(
        asyncio.wait_for(coro, timeout), client.loop.asyncio_loop
    )
    try:
        return done.result(timeout + 5)
    except BaseException:
        done.cancel()
        raise
