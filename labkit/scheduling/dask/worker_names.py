"""Who a worker is, beyond its address: its Dask name and threads, asked of the scheduler.

A trial's worker is recorded by address (``tcp://127.0.0.1:40151``; a slot
adds `` #0``, a group trial lists its workers joined by ``", "``), which
changes with every cluster.  What a board calls the worker (``worker 1``)
comes from the name the cluster gave it; :func:`worker_identities` asks the
scheduler for it (the name, kept as plain data, and the threads), so a sweep
can keep it beside its trials and a board read back later, with the cluster
gone, names the worker as the live board did.

Examples
--------
>>> worker_addresses("tcp://a:1 #0, tcp://b:2 (process 7)")
['tcp://a:1', 'tcp://b:2']
>>> worker_addresses("local"), worker_addresses(None)
([], [])
>>> identity_of({"name": 1, "nthreads": 2, "memory_limit": 0})
{'name': 1, 'nthreads': 2}
"""

from __future__ import annotations

from typing import Any

from .dask_adapter import scheduler_identity

__all__ = ["worker_addresses", "identity_of", "worker_identities"]


def worker_addresses(worker: str | None) -> list[str]:
    """The Dask addresses in a trial's worker: each of a group, without slot or process."""
    found = []
    for part in (worker or "").split(", "):
        address = part.split(" #")[0].split(" (")[0].strip()
        if "://" in address and address not in found:
            found.append(address)
    return found


def identity_of(worker: dict) -> dict:
    """What names a worker (the scheduler's record of it): its name, as plain data, and threads."""
    name = worker.get("name")
    if name is not None and not isinstance(name, (str, int, float)):
        name = str(name)  # a name of another kind still names it, as text
    return {"name": name, "nthreads": worker.get("nthreads")}


def worker_identities(client: Any, addresses=None, timeout: float | None = None) -> dict[str, dict]:
    """``{address: {"name": ..., "nthreads": ...}}`` of the cluster's workers (those of
    ``addresses`` alone when given), asked of the scheduler (waiting ``timeout`` seconds at
    most); raises what the ask raised."""
    workers = scheduler_identity(client, timeout).get("workers", {})
    wanted = None if addresses is None else set(addresses)
    return {a: identity_of(w) for a, w in workers.items() if wanted is None or a in wanted}
