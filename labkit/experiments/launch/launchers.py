"""The launcher of each placement: what starts a sweep's trials where its :class:`~.placement.Placement` says.

A launcher starts trials as slots free up and makes the engine's stops
happen; there is one for each :class:`~.placement.Where`, and the sweep
makes the one its placement names (:func:`launcher_of`).
"""

from __future__ import annotations

from .group import GroupLauncher
from .launcher import Launcher
from .placement import Placement, Where
from .remote import RemoteLauncher
from .slots import SlotLauncher
from .threads import InlineLauncher, ThreadLauncher

__all__ = ["LAUNCHERS", "launcher_of"]

#: The launcher of each placement.
LAUNCHERS: dict[Where, type[Launcher]] = {
    Where.INLINE: InlineLauncher,
    Where.THREADS: ThreadLauncher,
    Where.SLOTS: SlotLauncher,
    Where.TASKS: RemoteLauncher,
    Where.GROUPS: GroupLauncher,
}


def launcher_of(placement: Placement, engine, fn, max_concurrent: int | None) -> Launcher:
    """The launcher of ``placement`` for the sweep of ``engine``."""
    return LAUNCHERS[placement.where](placement, engine, fn, max_concurrent)
