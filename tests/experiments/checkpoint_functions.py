"""Trial functions of the checkpoint tests (importable by worker processes and subprocesses)."""

from __future__ import annotations

import os
import time

import numpy as np


def big_state(config, trial):
    """Checkpoints a state of ``config["mb"]`` MB each epoch; goes on from its restore."""
    start = (trial.restore() or {"epoch": -1})["epoch"] + 1
    for epoch in range(start, config["epochs"]):
        trial.report(epoch, loss=config["x"] + 1.0 / (epoch + 1), pid=os.getpid())
        w = np.full(config["mb"] * 1024 * 1024 // 8, float(epoch))
        trial.checkpoint({"epoch": epoch, "w": w, "x": config["x"]})
        time.sleep(config.get("pause", 0.0))
    return None


def stepper(config, trial):
    """Reports its pid, where it started from and its location at each step; checkpoints."""
    saved = trial.restore() or {"step": 0}
    start = saved["step"]
    for step in range(start, config["steps"]):
        time.sleep(config["pause"])
        trial.report(step, score=float(step), pid=os.getpid(), started=start)
        trial.checkpoint({"step": step + 1, "where": trial.location.url})
    return None


def marks_and_checkpoints(config, trial):
    """Touches ``config["mark"]`` (it ran) and checkpoints once."""
    open(config["mark"], "a").close()
    trial.report(0, loss=1.0)
    trial.checkpoint({"x": 1})


def tells_its_location(config, trial):
    """Writes its checkpoint location's URL to ``config["out"]``; checkpoints; fails if told."""
    with open(config["out"], "w") as fh:
        fh.write(trial.location.url)
    trial.report(0, loss=config["x"])
    trial.checkpoint({"x": config["x"]})
    if config.get("fail"):
        raise ValueError("told to fail")


def dies_after_checkpoints(config, trial):
    """Checkpoints steps 0..2 and kills its own process (a kernel that died) the first time;
    resumed, reports from the step its restored checkpoint says."""
    saved = trial.restore()
    start = 0 if saved is None else saved["step"]
    for step in range(start, config["steps"]):
        trial.report(step, score=float(step), started=start, pid=os.getpid())
        trial.checkpoint({"step": step + 1})
        if saved is None and step == 2:
            time.sleep(1.0)  # the store's writer commits the reference (every fraction of a s)
            os._exit(3)  # no cleanup, as a killed kernel
    return None
