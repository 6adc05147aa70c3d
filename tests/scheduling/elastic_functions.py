"""Trial functions and tasks the elastic-cluster tests run (importable on Dask workers)."""

from __future__ import annotations

import os
import time


def square(config, trial):
    """A one-report trial."""
    trial.report(0, loss=(config["x"] - 0.5) ** 2)
    return {"loss": (config["x"] - 0.5) ** 2}


def epochs(config, trial):
    """``config["epochs"]`` (8) epochs of ``config["pause"]`` (0.5) s, a checkpoint each;
    goes on from its last checkpoint; reports the process it ran in."""
    total, pause = int(config.get("epochs", 8)), float(config.get("pause", 0.5))
    start = trial.restore() or 0
    for epoch in range(start, total):
        time.sleep(pause)
        trial.report(epoch, loss=config["x"] / (epoch + 1), pid=os.getpid())
        trial.checkpoint(epoch + 1)
    return {"loss": config["x"] / total}


def sleepy(seconds: float) -> float:
    """A task of ``seconds`` s."""
    time.sleep(seconds)
    return seconds


def sleepy_trial(config, trial):
    """A trial of ``config["seconds"]`` s, one report at its end."""
    time.sleep(float(config["seconds"]))
    trial.report(0, loss=config["x"])
    return {"loss": config["x"]}
