"""The client's side of the probe: ranks that cannot reach each other, found in seconds.

Before a replica group's process group forms, every rank opens listening
sockets on the address its backend will use
(:func:`~labkit.data_parallel.worker.network.listen`) and connects to every
other rank's (:func:`~labkit.data_parallel.worker.network.reach`); a pair that
cannot connect is an error naming both ranks, their addresses and the setting
to change, instead of a rendezvous that hangs until its timeout.
"""

from __future__ import annotations

from ...errors import SchedulerError
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
        failed = tasks.run([tasks.submit(r, reach, targets[r]) for r in ranks], "set-up")
    finally:
        tasks.beside(close_probe, tasks.gid, workers=list(tasks.names))
    problems = [(r, *f) for r in ranks for f in failed[r]]
    if problems:
        bindings = [o["binding"] for o in opened]
        raise _unreachable(tasks.names, backend, bindings, problems, sum(map(len, targets)))


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
