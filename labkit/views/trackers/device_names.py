"""What views call workers and devices: a Dask worker by its name, this process, a torch device.

Events name a worker by its Dask address (``tcp://127.0.0.1:45929``,
``inproc://192.0.2.2/26189/6``), which says little on a board.  A
:class:`DeviceNames` asks the cluster once (and again, at most every few
seconds, when an address it does not know turns up) for each worker's name
and threads: a worker started with a name is called by it (``worker 0`` for
the numbers LocalCluster gives), the in-process worker is ``this process``
with its threads, and a torch device keeps its own name (``cuda:0``).  With
no cluster of its own (a stored sweep's board: ``lk.board(lk.load_sweep(...))``)
it asks the cluster this process has open, if any, so a stored board names
a worker as the live board did while that cluster runs.  A stored sweep
keeps its workers' names (``result.workers``; its run's feed says them as
``worker_identities``): those come first, so its board names every worker
as the live board did with the cluster gone, in any process; a worker
neither knows keeps its address.

Examples
--------
>>> names = DeviceNames([])
>>> names("tcp://127.0.0.1:45929"), names("cpu:0"), names("inproc://10.0.0.1/123/4")
('127.0.0.1:45929', 'cpu:0', 'this process')
>>> names("tcp://127.0.0.1:1, tcp://127.0.0.1:2")  # a trial's group of workers
'127.0.0.1:1, 127.0.0.1:2'
"""

from __future__ import annotations

import threading
import time

from ...scheduling.dask.worker_names import worker_identities
from .subjects import client_of

__all__ = ["DeviceNames", "kept_workers"]

#: Least seconds between two questions to the cluster.
REFRESH = 5.0


class DeviceNames:
    """Labels of workers and devices for ``sources`` (schedulers, runs, trainers)."""

    def __init__(self, sources, known: dict[str, dict] | None = None):
        self._client = client_of(*sources)
        self._own = self._client is not None  # else: the cluster this process has open
        self._labels: dict[str, str] = {}
        self._short: dict[str, str] = {}  # the names alone, without where they run
        self._asked = -REFRESH
        self._lock = threading.Lock()
        kept = known if known is not None else kept_workers(sources)
        if kept:  # a stored sweep's: as the cluster named them while it ran
            self.learn(kept)

    def __call__(self, address) -> str:
        address = str(address)
        if ", " in address:  # a group trial's workers: each by its name
            return ", ".join(self(a) for a in address.split(", "))
        with self._lock:
            label = self._labels.get(address)
        if label is not None:
            return label
        if "://" in address and time.monotonic() - self._asked >= REFRESH:
            self._ask()
            with self._lock:
                label = self._labels.get(address)
        return label or _fallback(address)

    def _ask(self) -> None:
        """Ask the cluster for its workers' names and threads (never raises)."""
        self._asked = time.monotonic()
        client = self._client if self._own else _open_client()
        if client is None:
            return
        try:
            workers = worker_identities(client)
        except Exception:  # the cluster is busy or gone: keep the addresses
            return
        self.learn(workers)

    def learn(self, workers: dict[str, dict]) -> None:
        """Name ``workers`` (``{address: {"name", "nthreads"}}``: a cluster's, or a sweep's
        kept ones) from now on; labels are made distinct among them."""
        labels = _unique({a: _label(a, w) for a, w in workers.items()})
        short = _unique({a: _name(a, w) for a, w in workers.items()})
        with self._lock:
            self._labels.update(labels)
            self._short.update(short)

    def short(self, address) -> str:
        """The worker's name alone, without where it runs (a narrow label: a task lane's)."""
        if ", " in str(address):
            return ", ".join(self.short(a) for a in str(address).split(", "))
        label = self(address)  # asks the cluster when it is time
        with self._lock:
            return self._short.get(str(address), label)


def kept_workers(sources) -> dict[str, dict]:
    """The workers a stored sweep kept, said by its run's feed (``worker_identities``)."""
    for source in sources:
        kept = getattr(source, "worker_identities", None)
        if isinstance(kept, dict) and kept:
            return kept
    return {}


def _open_client():
    """The Dask client this process has open (the newest), or None."""
    try:
        from distributed import default_client

        client = default_client()
    except (ImportError, ValueError):  # no Dask, or no client open
        return None
    return client if client.status == "running" else None


def _name(address: str, worker: dict) -> str:
    """A worker by its Dask name (``worker 0`` for a number), else its address."""
    name = worker.get("name")
    if name is None or str(name) == address:
        return _fallback(address)
    return f"worker {name}" if isinstance(name, int) or str(name).isdigit() else str(name)


def _label(address: str, worker: dict) -> str:
    threads = worker.get("nthreads")
    label = _name(address, worker)
    if address.startswith("inproc://"):
        where = (
            f"this process, {threads} thread{'s' * (threads != 1)}" if threads else "this process"
        )
        return f"{label} ({where})" if label != "this process" else where
    return label


def _unique(labels: dict[str, str]) -> dict[str, str]:
    """Labels made distinct (plots key their rows by label): a repeat gets its address."""
    seen: dict[str, int] = {}
    for label in labels.values():
        seen[label] = seen.get(label, 0) + 1
    return {
        a: label if seen[label] == 1 else f"{label} [{a.split('://', 1)[-1]}]"
        for a, label in labels.items()
    }


def _fallback(address: str) -> str:
    if address.startswith("inproc://"):
        return "this process"
    return address.split("://", 1)[-1]
