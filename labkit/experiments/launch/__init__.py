"""Where trials run and how their reports come back: in this thread, on threads, in slots on
worker processes, a task a trial, or a group of workers a trial; the sinks, sockets and loop.

A sweep is placed once (:class:`~.placement.Placement`, one of
:class:`~.placement.Where`), and the launcher of that placement
(:mod:`.launchers`) starts its trials.  :data:`SLOTS` off sends trials on
worker processes of this machine a task a trial, as on a cluster of other
hosts (for comparing the two routes).

It may import :mod:`labkit.experiments.trials`, :mod:`labkit.experiments.store` and
:mod:`labkit.scheduling`; never the search or a view.
"""

from .launchers import launcher_for, launcher_of
from .placement import Placement, Where, check_room

__all__ = ["SLOTS", "Placement", "Where", "check_room", "launcher_for", "launcher_of"]

#: Whether trials on worker processes of this machine run in slots (False: a task a trial,
#: the route of a cluster on other hosts; for comparing the two).  Read when a sweep is placed.
SLOTS = True
