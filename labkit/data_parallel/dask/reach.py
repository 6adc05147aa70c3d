"""The client's side of the probe: ranks that cannot reach each other, found in seconds.

Before a replica group's process group forms, every rank opens listening
sockets on the address its backend will use
(:func:`~labkit.data_parallel.worker.network.listen`) and connects to every
other rank's (:func:`~labkit.data_parallel.worker.network.reach`); a pair that
cannot connect is an error naming both ranks, their addresses and the setting
to change, instead of a rendezvous that hangs until its timeout.

A peer's loopback address on another host is never tried: from there it
names the connecting rank's own host, where an unrelated process listening
on the same port would answer for the peer.
"""

from __future__ import annotations

from ...errors import SchedulerError
from ...scheduling.dask.connect import is_loopback_host
from ..worker.network import VARIABLES, close_probe, listen, reach
from .tasks import RankTasks

__all__ = ["check_reach"]


def check_reach(tasks: RankTasks, backend: str, hosts: list[str], store_host: str | None) -> None:
    """Raise a ``SchedulerError`` naming every pair of ranks that cannot connect.

    ``tasks`` are those of a replica group being set up, over ``backend``;
    ``hosts[r]`` is rank *r*'s worker host and ``store_host`` the rendezvous
    store's host (rank 0's), ``None`` for a file rendezvous.
    """
    ranks = range(len(hosts))
    try:
        opened = tasks.run(
            [
                tasks.submit(
                    r, listen, tasks.gid, backend, hosts[r], store_host if r == 0 else None
                )
                for r in ranks
            ],
            "set-up",
        )
        targets = [
            [
                (p, a, port)
                for p in ranks
                if p != r
                for a, port in opened[p]["ports"].items()
                if a == opened[p]["binding"].address or a == store_host
            ]
            for r in ranks
        ]
        elsewhere = [
            [t for t in targets[r] if _loopback_elsewhere(t[1], hosts[r], hosts[t[0]])]
            for r in ranks
        ]
        tried = [[t for t in targets[r] if t not in elsewhere[r]] for r in ranks]
        failed = tasks.run([tasks.submit(r, reach, tried[r]) for r in ranks], "set-up")
    finally:
        tasks.beside(close_probe, tasks.gid, workers=list(tasks.names))
    problems = sorted(
        [(r, *f) for r in ranks for f in failed[r]]
        + [(r, p, a, port, _ELSEWHERE) for r in ranks for p, a, port in elsewhere[r]]
    )
    if problems:
        bindings = [o["binding"] for o in opened]
        raise _unreachable(tasks.names, backend, bindings, problems, sum(map(len, targets)))


_ELSEWHERE = "a loopback address, which from another host is that host itself"


def _loopback_elsewhere(address: str, host: str, peer_host: str) -> bool:
    """``address`` is a loopback one and the peer is on another host than this rank.

    Hosts are compared as the workers' Dask addresses give them; a worker on a
    loopback address is on the client's machine, which may be its peer's too.
    """
    return is_loopback_host(address) and host != peer_host and not is_loopback_host(host)


def _unreachable(names, backend, bindings, problems, tried) -> SchedulerError:
    """The error for ranks that cannot connect: who, where, and the setting to use."""

    def what(p, address):  # the peer's own listening address, or rank 0's store only
        return bindings[p].describe() if address == bindings[p].address else "the rendezvous store"

    lines = [
        f"rank {r} (worker {names[r]}) cannot connect to rank {p} at "
        f"{address}:{port}, {what(p, address)}: {error}"
        for r, p, address, port, error in problems
    ]
    variable = VARIABLES.get(backend, "the backend's interface variable")
    advice = (
        f"each rank must listen on an address its peers can reach: set {variable} on "
        f"each worker to the interface that holds its Dask address, or leave it unset "
        f"and labkit picks that interface itself"
    )
    first = problems[0]
    return SchedulerError(
        f"the replicas cannot connect to each other ({len(problems)} of "
        f"{tried} connections failed): " + "; ".join(lines) + f"; {advice}",
        replica=first[0],
        device=names[first[0]],
    )
