"""Forming a replica group's process group: where its ranks meet, then every rank joins.

A group forms once when it is set up, and again (a new generation) over the
workers left after one was lost (:mod:`.epochs`).  Its ranks meet through a
file in a private folder when every worker is on this machine's loopback,
else through torch's TCP store on rank 0's host; before the first forming,
ranks that cannot reach each other are found in seconds (:mod:`.reach`).
"""

from __future__ import annotations

import os
import tempfile

from ..worker import lifecycle as life
from .reach import check_reach
from .tasks import RankTasks

__all__ = ["meeting_point", "join_ranks"]


def meeting_point(
    how: str, local: bool, tasks: RankTasks, hosts: list[str]
) -> tuple[str, str | None]:
    """``(url, folder)``: where the ranks meet, and a file rendezvous' folder (the caller's to remove).

    ``how`` is the group's ``rendezvous`` (``"auto"``, ``"tcp"`` or ``"file"``),
    ``local`` whether every worker is on loopback.  torch's TCP store listens
    on every interface whatever host it is given, so a cluster on 127.0.0.1
    (the embedded one) meets through a file in a private temporary folder
    instead and opens no socket beyond loopback.
    """
    if how == "file" or (how == "auto" and local):
        folder = tempfile.mkdtemp(prefix="labkit-dist-")
        return "file://" + os.path.join(folder, "store"), folder
    port = tasks.run([tasks.submit(0, life.free_port, hosts[0])], "set-up")[0]
    host = f"[{hosts[0]}]" if ":" in hosts[0] else hosts[0]
    return f"tcp://{host}:{port}", None


def join_ranks(
    tasks: RankTasks,
    url: str,
    backend: str,
    timeout: float,
    hosts: list[str],
    generation: int,
    check: bool = False,
) -> list[str]:
    """Every rank joins the process group that meets at ``url``; the interface each one uses.

    ``hosts[r]`` is rank *r*'s worker host.  With ``check``, ranks that cannot
    reach each other fail first, in seconds rather than at the timeout.
    """
    if check:
        check_reach(tasks, backend, hosts, hosts[0] if url.startswith("tcp://") else None)
    world = len(hosts)
    return tasks.run(
        [
            tasks.submit(
                r, life.join, tasks.gid, r, world, url, backend, timeout, hosts[r], generation
            )
            for r in range(world)
        ],
        "set-up",
    )
