"""Workers that warm up as they start: modules imported in the background, said when done.

A worker that a nanny started afresh (its lifetime's end, a preemption, an
adaptive scale-up) imports what its first task needs when that task reaches
it: torch and labkit's rank code take seconds on a loaded machine, spent on
the worker's event loop while the work that chose the worker waits (a group
trial's replicas on a cluster of 15 s lifetimes spent half of each worker's
life so).  :func:`warm_workers` has every worker of a cluster, now and later,
import given modules on a thread of its own as it starts, and say with its
heartbeats when it is done (the metric :data:`WARM`), so that a group can
prefer workers that are ready (:func:`is_warm`).  A task that arrives meanwhile
waits for the same import, never a second one.
"""

from __future__ import annotations

import logging

__all__ = ["WARM", "WARMING", "is_warm", "warm_workers"]

logger = logging.getLogger("labkit.scheduling")

#: The name of labkit's warming plugin on the workers.
WARMING = "labkit-warming"

#: The metric a warming worker sends with its heartbeats: True once its imports are done.
WARM = "labkit-warm"


def warm_workers(client, modules: tuple[str, ...], every_worker: bool = True) -> None:
    """Have the workers of ``client``'s cluster (now and later) import ``modules`` as they start.

    An entry ``"package.module:function"`` imports the module, then calls
    ``function()`` (a first use that costs what no import does).  Without
    ``every_worker``, only workers with a ``lifetime`` warm up: those of a
    cluster whose workers stay import on their first task, as before, and pay
    nothing for a sweep that never needs the modules.  Once per cluster: a
    second call changes nothing.  A cluster that refuses plugins leaves its
    workers to import on their first task, as before.
    """
    try:
        client.register_plugin(_plugin(tuple(modules), every_worker), name=WARMING)
    except Exception:  # an old or locked-down cluster: the first task imports
        logger.debug("labkit: could not have the workers warm up", exc_info=True)


def is_warm(worker: dict) -> bool:
    """Whether a worker (the scheduler's record of it) has imported what it was told to.

    Unknown (no warming plugin, or no heartbeat since it started) counts as warm.

    >>> is_warm({"metrics": {WARM: False}}), is_warm({"metrics": {WARM: True}}), is_warm({})
    (False, True, True)
    """
    return (worker.get("metrics") or {}).get(WARM) is not False


def _plugin(modules: tuple[str, ...], every_worker: bool):
    """The worker plugin, made here so that it travels by value."""
    from distributed.diagnostics.plugin import WorkerPlugin

    class Warming(WorkerPlugin):
        """Imports ``modules`` on a thread of the worker as it starts; a metric says when done."""

        idempotent = True  # registered again by each sweep: the first one stays
        name = WARMING
        metric = WARM

        def __init__(self, modules: tuple[str, ...], every_worker: bool):
            self.modules, self.every_worker = modules, every_worker

        def setup(self, worker) -> None:
            """Start the imports on a thread of their own; the worker's loop goes on."""
            import threading

            if not (self.every_worker or worker.lifetime):  # a worker that stays: no warming
                return

            done = threading.Event()
            worker.metrics[self.metric] = lambda _worker: done.is_set()
            threading.Thread(
                target=self.load, args=(done,), daemon=True, name="labkit-warming"
            ).start()

        def load(self, done) -> None:
            """Import every module, call its function if named (one that fails is left to
            the task that needs it)."""
            import contextlib
            import importlib

            try:
                for entry in self.modules:
                    name, _, function = entry.partition(":")
                    with contextlib.suppress(Exception):
                        module = importlib.import_module(name)
                        if function:
                            vars(module)[function]()
            finally:
                done.set()

    return Warming(modules, every_worker)
