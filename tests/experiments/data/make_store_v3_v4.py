"""How ``store_v3.db`` and ``store_v4.db`` were written: by labkit's stores of schema versions 3
(commit 7f88741, before checkpoint references) and 4 (commit 9594664, before several objectives).

Run once with each commit's code, from this folder:
``PYTHONPATH=<that labkit> python make_store_v3_v4.py store_v3.db`` (and ``store_v4.db``);
kept to say what the files hold, not run by the tests.
"""

import sys

import labkit as lk


def bowl(config, trial):
    """Three reports of a loss falling towards ``(x - 0.3) ** 2``; returns nothing."""
    for step in range(3):
        trial.report(step, loss=(config["x"] - 0.3) ** 2 + 1.0 / (step + 1))


def main(path: str) -> None:
    """Write the store ``path``: one sweep "bowl" of five trials, all completed."""
    lk.sweep(bowl, {"x": lk.uniform(0, 1)}, trials=5, metric="loss", mode="min", seed=3,
             store=path, name="bowl")


if __name__ == "__main__":  # never on import (a doctest run imports every module)
    main(sys.argv[1])
