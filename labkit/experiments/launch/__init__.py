"""Where trials run and how their reports come back: in this thread, on threads, in slots on
worker processes, a task a trial, or a group of workers a trial; the sinks, sockets and loop.

It may import :mod:`labkit.experiments.trials`, :mod:`labkit.experiments.store` and
:mod:`labkit.scheduling`; never the search or a view.
"""

__all__: list[str] = []
