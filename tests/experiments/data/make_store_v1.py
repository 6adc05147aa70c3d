"""How ``store_v1.db`` was written: by labkit's store of schema version 1 (a JSON row a report).

Run once with the code of commit e5a5a5c (schema version 1), from this folder:
``PYTHONPATH=<that labkit>:<this checkout> python make_store_v1.py``; kept to say
what the file holds, not run by the tests.
"""

import numpy as np

import labkit as lk
from tests.experiments import functions as F


def mixed(config, trial):
    """Reports whose metrics change from one to the next, a NaN, half steps; some fail."""
    for k in range(4):
        step = k / 2 if config["x"] < 0.5 else k  # 0, 0.5, 1 (an int), 1.5: mixed kinds
        metrics = {"loss": config["x"] / (k + 1), "epoch": k}
        if k == 2:
            metrics["loss"] = float("nan")
        if k == 3:
            metrics.update(acc=np.float32(0.5), grad=1e300)
        trial.report(step, **metrics)
    if config["x"] > 0.8:
        raise ValueError(f"x={config['x']:.2f} is too large")
    return {"loss": config["x"], "epoch": 4}


def main() -> None:
    """Write ``store_v1.db`` in the current folder."""
    lk.sweep(F.curve, {"q": lk.uniform(0.5, 1.0), "steps": 5}, trials=6, metric="acc",
             mode="max", seed=3, early_stop=lk.ASHA(min_steps=1, reduction=2),
             store="store_v1.db", name="asha")
    lk.sweep(mixed, {"x": lk.uniform(0, 1)}, trials=6, metric="loss", mode="min", seed=2,
             store="store_v1.db", name="mixed")


if __name__ == "__main__":  # never on import (a doctest run imports every module)
    main()
