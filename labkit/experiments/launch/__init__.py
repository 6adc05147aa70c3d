"""Where trials run and how their reports come back: in this thread, on threads, in slots on
worker processes, a task a trial, or a group of workers a trial; the channels, sockets and loop.

A sweep is placed once (:func:`place`: a :class:`~.placement.Placement`, one
of :class:`~.placement.Where`), the launcher of that placement
(:mod:`.launchers`) starts its trials, and every trial talks to the sweep
through a :class:`~.channel.TrialChannel`.  :data:`SLOTS` off sends trials
on worker processes of this machine a task a trial, as on a cluster of
other hosts (for comparing the two routes).

It may import :mod:`labkit.experiments.trials`, :mod:`labkit.experiments.store` and
:mod:`labkit.scheduling`; never the search or a view.
"""

from __future__ import annotations

from .launcher import Launcher
from .launchers import launcher_of
from .placement import Placement, Where, check_room

__all__ = ["SLOTS", "Placement", "Where", "check_room", "launcher_for", "launcher_of", "place"]

#: Whether trials on worker processes of this machine run in slots (False: a task a trial,
#: the route of a cluster on other hosts; for comparing the two).  Read when a sweep is placed.
SLOTS = True


def place(scheduler, workers_per_trial: int = 1, holds_gil: bool = False) -> Placement:
    """Where a sweep's trials run on ``scheduler`` (:data:`SLOTS` read now)."""
    return Placement.choose(scheduler, workers_per_trial, holds_gil, slots=SLOTS)


def launcher_for(
    scheduler, engine, fn, holds_gil: bool, workers_per_trial: int, max_concurrent: int | None
) -> Launcher:
    """The launcher that suits ``scheduler`` (its placement chosen here)."""
    return launcher_of(place(scheduler, workers_per_trial, holds_gil), engine, fn, max_concurrent)
