"""Trial functions the experiment tests run (importable on Dask workers)."""

from __future__ import annotations

import os
import time

import numpy as np


def quadratic(config, trial):
    """A loss that falls each step, lowest near x = 0.3; five reports."""
    for step in range(5):
        trial.report(step, loss=(config["x"] - 0.3) ** 2 + 1.0 / (step + 1))
    return {"loss": (config["x"] - 0.3) ** 2}


def curve(config, trial):
    """``steps`` reports of an accuracy rising towards ``config["q"]``; sleeps ``pause`` each."""
    start = trial.restore() or 0
    for step in range(start, config.get("steps", 9)):
        time.sleep(config.get("pause", 0.0))
        trial.report(step, acc=config["q"] * (1 - 0.5 / (step + 1)))
        trial.checkpoint(step + 1)
    return None


def gated_curve(config, trial):
    """``curve``, whose reports after the first wait until the file ``config["gate"]``
    exists (at most 300 s): a sweep that runs until a test has seen it running."""
    start = trial.restore() or 0
    for step in range(start, config.get("steps", 9)):
        deadline = time.monotonic() + 300
        while step > 0 and not os.path.exists(config["gate"]) and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(config.get("pause", 0.0))
        trial.report(step, acc=config["q"] * (1 - 0.5 / (step + 1)))
        trial.checkpoint(step + 1)
    return None


def failing(config, trial):
    """Fails for x > 0.5, after one report."""
    trial.report(0, loss=config["x"])
    if config["x"] > 0.5:
        raise ValueError(f"x={config['x']:.2f} is too large")
    return {"loss": config["x"]}


def always_fails(config, trial):
    raise RuntimeError("broken on purpose")


def no_metric(config, trial):
    """Reports a loss, never the accuracy the sweep asks for."""
    trial.report(0, loss=1.0)


def returns_number(config, trial):
    return config["x"] * 2


def slow_steps(config, trial):
    """Many short steps: a trial that a stop or a cancel catches mid-way."""
    for step in range(config.get("steps", 400)):
        time.sleep(0.01)
        trial.report(step, loss=1.0 / (step + 1))
    return None


def marked(config, trial):
    """Marks each run and each step in ``config["folder"]``; checkpoints every step.

    ``runs/<trial>-<first step>-<pid>-<time>`` tells which trial ran, from which step.
    """
    folder = config["folder"]
    start = trial.restore() or 0
    mark = os.path.join(folder, f"run-{trial.id}-{start}-{os.getpid()}-{time.time_ns()}")
    open(mark, "w").close()
    for step in range(start, config["steps"]):
        time.sleep(config["pause"])
        trial.report(step, score=config["x"] * (step + 1))
        trial.checkpoint(step + 1)
    return {"score": config["x"] * config["steps"]}


def torch_state(config, trial):
    """Checkpoints a torch model's state dict and a numpy array; restores both."""
    import torch
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    held = trial.restore()
    start = 0
    if held is not None:
        model.load_state_dict(held["model"])
        start = held["step"]
        assert held["array"].tolist() == list(range(start))
    for step in range(start, config["steps"]):
        with torch.no_grad():
            model.weight += 1.0
        time.sleep(config.get("pause", 0.0))
        trial.report(step, w=float(model.weight.sum()), started=start)
        trial.checkpoint({"model": model.state_dict(), "step": step + 1,
                          "array": np.arange(step + 1)})
    return None


def pid_and_steps(config, trial):
    """Reports its pid at each step (so a test knows which worker to kill); checkpoints."""
    start = trial.restore() or 0
    for step in range(start, config["steps"]):
        time.sleep(config["pause"])
        trial.report(step, score=float(step), pid=os.getpid(), started=start)
        trial.checkpoint(step + 1)
    return None


def gated_pid_and_steps(config, trial):
    """:func:`pid_and_steps`; every trial but the first waits for ``config["gate"]`` to exist.

    So a sweep cannot end before the test opens the gate (a worker it killed may take long to
    come back on a loaded machine).
    """
    if trial.id > 0:
        deadline = time.monotonic() + 300
        while not os.path.exists(config["gate"]) and time.monotonic() < deadline:
            time.sleep(0.05)
    return pid_and_steps(config, trial)


def attempt_and_steps(config, trial):
    """Reports its pid and ``trial.attempt`` at each step; checkpoints (a worker may be killed)."""
    start = trial.restore() or 0
    for step in range(start, config["steps"]):
        time.sleep(config["pause"])
        trial.report(step, score=float(step), pid=os.getpid(), attempt=trial.attempt)
        trial.checkpoint(step + 1)
    return None


def exits(config, trial):
    """``sys.exit(3)``, a KeyboardInterrupt of its own, or a plain end, as ``config["do"]`` says."""
    import sys

    trial.report(0, loss=1.0)
    if config["do"] == "exit":
        sys.exit(3)
    if config["do"] == "interrupt":
        raise KeyboardInterrupt
    return {"loss": 0.5}


def typo(config, trial):
    """Reports ``accuracy=`` (the sweep asks for ``acc``); marks each epoch begun in ``folder``."""
    for epoch in range(config["epochs"]):
        open(os.path.join(config["folder"], f"epoch-{trial.id}-{epoch}"), "w").close()
        time.sleep(config.get("pause", 0.0))
        trial.report(epoch, accuracy=0.5 + epoch / 100)
    return None


def slow_loss(config, trial):
    """``steps`` reports of a loss, ``pause`` seconds apart."""
    for step in range(config["steps"]):
        time.sleep(config["pause"])
        trial.report(step, loss=config["x"] + 1.0 / (step + 1))
    return None
