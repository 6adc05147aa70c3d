"""Trial functions of the tests of workers that close, listeners and unprintable errors.

In a module of its own (not the test files) so that worker processes import it.
"""

from __future__ import annotations

import os
import time

__all__ = ["Unprintable", "unprintable", "long_step", "until_moved"]


class Unprintable(Exception):
    """An error whose ``__str__`` raises (as a user's own exception class may)."""

    def __str__(self):
        raise RuntimeError("no words for this error")


def unprintable(config, trial):
    """Reports once, then raises an :class:`Unprintable`."""
    trial.report(0, loss=1.0)
    raise Unprintable(config["x"])


def long_step(config, trial):
    """Reports once, then one step of its own code far longer than a worker has to close."""
    trial.report(0, loss=config["x"], pid=os.getpid())
    time.sleep(600)
    trial.report(1, loss=config["x"])


def until_moved(config, trial):
    """Steps (a checkpoint each) until it runs again on another worker, then 3 steps more."""
    start = trial.restore() or 0
    step = start
    while trial.attempt == 0 or step < start + 3:
        trial.report(step, loss=1.0 / (step + 1), pid=os.getpid())
        trial.checkpoint(step + 1)
        step += 1
        time.sleep(0.05)
    return {"loss": 1.0 / step}
