"""One trial as everyone sees it: the handle given to ``fn(config, trial)``, its record and
status, the engine's bookkeeping around it, and how an execution's outcome ends it.

It imports nothing else of :mod:`labkit.experiments`.
"""

__all__: list[str] = []
