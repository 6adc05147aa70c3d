"""Transports: how a task and its chunk reach a Dask worker, one object per route.

A route is chosen by what the cluster is, once, when a
:class:`~labkit.scheduling.DaskScheduler` opens (after joblib's parallel
backends: one base class, capability flags, a registry the scheduler asks):

========================  ==========================================================
route (``name``)          carries
========================  ==========================================================
``"in-process"``          tasks on worker threads of this process: the chunk by
                          reference, the outcome recorded by the task itself
``"shared-memory"``       big chunk arrays to worker processes on this machine,
                          copied once into shared memory and mapped there
``"direct-scatter"``      big chunks straight to a worker process (not through the
                          scheduler), sent again if that worker is lost
``"graph"``               everything else inside the task graph: a plain chunk, a
                          lazy block computed inside its task, a delayed chunk
========================  ==========================================================

:func:`open_routes` makes the routes a cluster can use, in order of
``priority``; each task goes by the first route that :meth:`Transport.prepare`
takes it.  Every route has the same verbs: ``submit`` (start a task),
``resubmit`` (start it again after its inputs were lost with a worker) and
``release`` (give back what the route holds for a task that is done or
cancelled).  Outcomes and failures go to :class:`~labkit.scheduling.routes.outcomes.Outcomes`,
whatever the route, so they reach their batch on one thread.

Examples
--------
>>> traits = ClusterTraits(in_process=True, by_reference=True, shares_memory=False)
>>> [cls.name for cls in route_classes(traits)]
['in-process', 'graph']
>>> traits = ClusterTraits(in_process=False, by_reference=False, shares_memory=True)
>>> [cls.name for cls in route_classes(traits)]
['shared-memory', 'direct-scatter', 'graph']
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar

from ..dask.connect import on_loopback
from ..tasks.open_task import OpenTask
from .outcomes import Outcomes

__all__ = [
    "Transport",
    "ClusterTraits",
    "RouteContext",
    "PASS",
    "register",
    "unregister",
    "route_classes",
    "open_routes",
    "task_key",
    "task_key_prefix",
    "task_of_key",
    "direct_bytes_for",
]

#: What :meth:`Transport.prepare` returns for a chunk it does not carry.
PASS = object()


@dataclasses.dataclass(frozen=True)
class ClusterTraits:
    """What a cluster is, as the routes ask it (decided once, when the scheduler opens)."""

    in_process: bool  # workers are threads of this process
    by_reference: bool  # in-process inputs are handed by reference (not pickled)
    shares_memory: bool  # worker processes on this machine map chunks from shared memory


@dataclasses.dataclass
class RouteContext:
    """What the routes need of their scheduler."""

    client: Any
    outcomes: Outcomes
    run_options: Callable[[], tuple]  # () -> (start topic or None, offload token or None)
    direct_bytes: int  # chunks from this size on go straight to a worker
    #: Dask keywords that keep every task (and copied chunk) on some workers alone:
    #: ``{"workers": [...], "allow_other_workers": False}``; empty: anywhere
    placement: dict = dataclasses.field(default_factory=dict)


class Transport:
    """One route from the client to the workers; subclasses register themselves.

    Capability flags (class attributes) say what a route can do, and the
    scheduler asks them instead of knowing the routes:
    """

    #: The route's name in the registry.
    name: ClassVar[str] = ""
    #: Routes are tried in this order (lowest first); the last must take every chunk.
    priority: ClassVar[int] = 100
    #: Its tasks record their own outcome (nothing is fetched back from Dask).
    records_own_outcome: ClassVar[bool] = False
    #: It can start a group of tasks of one callable in one call (``submit_group``).
    starts_groups: ClassVar[bool] = False
    #: It copies the chunk somewhere (shared memory, a worker): ``release`` frees it.
    holds_copies: ClassVar[bool] = False

    def __init__(self, context: RouteContext):
        self.context = context

    @classmethod
    def usable(cls, traits: ClusterTraits) -> bool:
        """Whether this route serves a cluster with ``traits``."""
        return True

    def prepare(self, entry: OpenTask, data) -> Any:
        """What this route sends for ``entry``'s chunk, or :data:`PASS` when it does not carry it."""
        return data

    def submit(self, entry: OpenTask, payload) -> Any:
        """Start ``entry`` with its prepared chunk; its Dask future, or ``None`` until known."""
        raise NotImplementedError

    def submit_group(self, group: list) -> list | None:
        """Start ``[(entry, data), ...]`` in one call; their futures, or ``None`` if it cannot."""
        return None

    def resubmit(self, entry: OpenTask) -> Any:
        """Start ``entry`` again (its inputs were lost with a worker): a new key, same chunk."""
        payload = self.prepare(entry, entry.data)
        if payload is PASS:  # a route takes the same chunk every time; only a bug gets here
            raise RuntimeError(f"the {self.name} route no longer carries chunk {entry.info.chunk}")
        return self.submit(entry, payload)

    def release(self, entry: OpenTask, outcome=None) -> None:
        """Give back what the route holds for ``entry`` (done, failed or cancelled)."""

    def close(self) -> None:
        """Give back everything (the scheduler shuts down)."""

    def __repr__(self):
        return f"<{type(self).__name__} {self.name!r}>"


_REGISTRY: dict[str, type[Transport]] = {}


def register(cls: type[Transport]) -> type[Transport]:
    """Add a route class to the registry (a class decorator)."""
    if not cls.name:
        raise TypeError(f"{cls.__name__} needs a name to be registered")
    _REGISTRY[cls.name] = cls
    return cls


def unregister(name: str) -> None:
    """Take the route called ``name`` out of the registry (a route of your own, say)."""
    _REGISTRY.pop(name, None)


def route_classes(traits: ClusterTraits) -> list[type[Transport]]:
    """The registered routes that serve ``traits``, in the order they are tried."""
    return sorted(
        (cls for cls in _REGISTRY.values() if cls.usable(traits)), key=lambda cls: cls.priority
    )


def open_routes(traits: ClusterTraits, context: RouteContext) -> list[Transport]:
    """One transport object per route the cluster uses, in the order they are tried."""
    return [cls(context) for cls in route_classes(traits)]


def task_key(entry: OpenTask) -> str:
    """The Dask key of ``entry``'s current attempt: ``labkit-{kind}-{run}-{task}-{attempt}``."""
    return f"{task_key_prefix(entry)}{entry.attempts}"


def task_key_prefix(entry: OpenTask) -> str:
    """What the Dask keys of all ``entry``'s attempts begin with."""
    info = entry.info
    return f"labkit-{info.kind}-{info.run}-{info.task}-"


def task_of_key(key) -> int | None:
    """The task id in a key made by :func:`task_key`.

    >>> task_of_key("labkit-train-r1-17-2"), task_of_key("other")
    (17, None)
    """
    try:
        return int(str(key).rsplit("-", 2)[1])
    except (IndexError, ValueError):
        return None


def direct_bytes_for(addresses) -> int:
    """From how many bytes a chunk goes straight to a worker rather than in the task graph.

    1 MiB where every worker is on this machine; 64 KiB where one is on
    another host, where a chunk in the task graph crosses the network twice
    (client to scheduler, scheduler to worker).  The data-parallel trainer's
    commands follow the same rule.

    >>> direct_bytes_for(["tcp://127.0.0.1:4000"]), direct_bytes_for(["tcp://10.0.0.5:4000"])
    (1048576, 65536)
    """
    return 2**20 if on_loopback(addresses) else 2**16
