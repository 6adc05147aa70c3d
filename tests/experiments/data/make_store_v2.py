"""How ``store_v2.db`` was written: by labkit's store of schema version 2 (before PBT's exploits).

Run once with the code of commit 387cc47 (schema version 2), from this folder:
``PYTHONPATH=<that labkit>:<this checkout> python make_store_v2.py``; kept to say
what the file holds, not run by the tests.
"""

import labkit as lk


def climb(config, trial):
    """Six steps of a score that grows by ``lr``, checkpointed at every step."""
    saved = trial.restore() or {"step": 0, "score": 0.0}
    score = saved["score"]
    for step in range(saved["step"] + 1, 7):
        score += config["lr"]
        trial.checkpoint({"step": step, "score": score})
        trial.report(step, score=score)


def main() -> None:
    """Write ``store_v2.db`` in the current folder."""
    lk.sweep(climb, {"lr": lk.uniform(0, 1)}, trials=4, metric="score", mode="max", seed=5,
             early_stop=lk.ASHA(min_steps=2, reduction=2), store="store_v2.db", name="climb")


if __name__ == "__main__":  # never on import (a doctest run imports every module)
    main()
