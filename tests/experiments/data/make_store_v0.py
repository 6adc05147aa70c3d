"""How ``store_v0.db`` was written: by labkit's store before its schema had a version.

Run once with the code of commit 511fb4b (the schema without ``user_version``);
kept to say what the file holds, not run by the tests.
"""

import labkit as lk
from tests.experiments import functions as F


def main() -> None:
    """Write ``store_v0.db`` in the current folder."""
    lk.sweep(F.curve, {"q": lk.uniform(0.5, 1.0), "steps": 5}, trials=6, metric="acc",
             mode="max", seed=3, early_stop=lk.ASHA(min_steps=1, reduction=2),
             store="store_v0.db", name="asha")
    try:
        lk.sweep(F.failing, {"x": lk.uniform(0, 1)}, trials=4, metric="loss", mode="min",
                 seed=5, store="store_v0.db", name="failing")
    except lk.TaskError:
        pass


if __name__ == "__main__":  # never on import (a doctest run imports every module)
    main()
