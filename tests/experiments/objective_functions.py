"""Trial functions of several objectives (importable on Dask workers; issue 48)."""

from __future__ import annotations


def zdt1(x: float, y: float) -> tuple[float, float]:
    """A ZDT1-like pair on [0, 1]^2: ``f1 = x``, ``f2 = g (1 - sqrt(x / g))``, ``g = 1 + 9 y``."""
    g = 1.0 + 9.0 * y
    return x, g * (1.0 - (x / g) ** 0.5)


def two_objectives(config, trial):
    """Three reports approaching the ZDT1 pair; returns nothing (the last report counts)."""
    f1, f2 = zdt1(config["x"], config["y"])
    for step in range(3):
        slack = 1.0 / (step + 1) - 1.0 / 3
        trial.report(step, loss=f1 + slack, latency_ms=f2 + slack)


def returns_both(config, trial):
    """Returns both objectives (and reports the first only after its first report holds both)."""
    f1, f2 = zdt1(config["x"], config["y"])
    trial.report(0, loss=f1 + 1, latency_ms=f2 + 1)
    return {"loss": f1, "latency_ms": f2}


def reports_one(config, trial):
    """Reports the first objective only: a trial of two objectives fails at its first report."""
    trial.report(0, loss=config["x"])


def returns_one(config, trial):
    """Reports nothing, returns the first objective only."""
    return {"loss": config["x"]}


def returns_number(config, trial):
    """Returns a bare number: no answer to several objectives."""
    return config["x"]


def loss_at_most_half(metrics):
    """One constraint: ``loss <= 0.5`` (a value <= 0 is satisfied)."""
    return [metrics["loss"] - 0.5]


def broken_constraints(metrics):
    """A constraints function that fails."""
    raise KeyError("accuracy")


def checkpoints_both(config, trial):
    """Reports ``a`` and ``b`` as the objectives, checkpoints its configuration, returns them."""
    trial.report(0, loss=config["a"], latency_ms=config["b"])
    trial.checkpoint(dict(config))
    return {"loss": config["a"], "latency_ms": config["b"]}
