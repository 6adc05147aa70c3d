"""Trial functions that run until a file appears (importable on Dask workers)."""

from __future__ import annotations

import os
import time

#: Most epochs a gated trial runs when its gate never opens (a bound, not a wait: 300 s).
MOST_EPOCHS = 3000


def until_open(config, trial):
    """Epochs of 0.1 s, a checkpoint each, until the file ``config["gate"]`` exists;
    goes on from its last checkpoint (a trial that moved)."""
    start = trial.restore() or 0
    epoch = start
    while epoch < MOST_EPOCHS and not os.path.exists(config["gate"]):
        time.sleep(0.1)
        trial.report(epoch, loss=config["x"] / (epoch + 1))
        epoch += 1
        trial.checkpoint(epoch)
    trial.report(epoch, loss=config["x"] / (epoch + 1))
    return {"loss": config["x"] / (epoch + 1)}
