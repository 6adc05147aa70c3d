"""What a look at a live store costs (``labkit dashboard --store``): idle, and after new reports.

``python benchmarks/bench_store_changes.py`` (about a minute on 2 cores; ``--quick``: a
smoke test).  A store holds one sweep of N ended trials of 30 reports each (one pack a
trial, as a sweep leaves it); a reader (:class:`StoreChanges` on the store opened
read-only, as the dashboard opens it) took its first look.  Timed, as the median of
many looks: an idle look (nothing written since), an idle look while 10 trials run,
and a look after 100 new reports (10 running trials x 10 reports, in 10 commits, then
again once those trials reported 2,000 commits more; and 100 trials x 1 report, each
trial starting).  The same at N = 1,000 and 10,000 side by
side, with the first look (the whole store read) for scale: a look should cost what
changed, not the store's size.  It prints and never asserts.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from labkit.experiments.store.database import Store  # noqa: E402
from labkit.experiments.store.changes import StoreChanges  # noqa: E402

STEPS = 30
REPEAT = 15
LONG = 2000


def filled(path: str, n: int) -> Store:
    """A store of one sweep of ``n`` ended trials of :data:`STEPS` reports each."""
    store = Store(path)
    store.create_sweep("big", '{"space": {"x": {}}}', "loss", "min", 0, {}, now=False)
    store.add_trials("big", [(i, {"x": i / n}) for i in range(n)])
    for i in range(n):
        reports = [(s, {"loss": 1.0 / (s + 1 + i)}, 1.0 + s) for s in range(STEPS)]
        store.trial_started("big", i, 1, "w #0", 1.0)
        store.trial_reports("big", i, 1, reports, (reports[-1][1]["loss"],) * 2 + (STEPS - 1,))
        last = reports[-1][1]["loss"]
        store.trial_finished("big", i, "completed", {"loss": last}, last, last, STEPS - 1, ended=2.0)
    store.flush()
    return store


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def one_size(n: int, folder: str, long: int = LONG) -> dict:
    path = os.path.join(folder, f"s{n}.db")
    writer = filled(path, n)
    reader = Store(path, readonly=True)
    changes = StoreChanges(reader)
    out = {"first": timed(changes.look)}
    changes.look()
    out["idle"] = statistics.median(timed(changes.look) for _ in range(REPEAT))
    running = list(range(n, n + 10))  # new trials' ids
    writer.add_trials("big", [(i, {"x": 0.5}) for i in running])
    for i in running:
        writer.trial_started("big", i, 1, "w #1", time.time())
    writer.flush()
    changes.look()
    out["idle, 10 running"] = statistics.median(timed(changes.look) for _ in range(REPEAT))
    steps = iter(range(10**9))
    out["100 reports of 10 running"] = _rounds(changes, lambda: commits(writer, running, 10, steps))
    commits(writer, running, long, steps)  # the running trials' history grows: a pack a commit
    changes.look()
    out[f"same, {long:,} packs more each"] = _rounds(
        changes, lambda: commits(writer, running, 10, steps)
    )
    new = iter(range(n + 10, 10**9))
    out["100 reports of 100 new trials"] = _rounds(changes, lambda: new_trials(writer, new, 100))
    writer.close()
    reader.close()
    return out


def commits(writer: Store, trials: list, count: int, steps) -> None:
    """``count`` commits of a report of each of ``trials``."""
    for _ in range(count):
        step = next(steps)
        for i in trials:
            writer.trial_reports("big", i, 1, [(step, {"loss": 0.5}, time.time())])
        writer.flush()


def new_trials(writer: Store, ids, count: int) -> None:
    """``count`` trials that start and report once (those of the round before ended)."""
    made = [next(ids) for _ in range(count)]
    writer.add_trials("big", [(i, {"x": 0.5}) for i in made])
    for i in made:
        writer.trial_started("big", i, 1, "w #2", time.time())
        writer.trial_reports("big", i, 1, [(0, {"loss": 0.5}, time.time())])
    writer.flush()
    for i in made:  # ended at the next round, long ago: not read again after it
        writer.trial_finished("big", i, "completed", {"loss": 0.5}, 0.5, 0.5, 0, ended=1.0)


def _rounds(changes: StoreChanges, write) -> float:
    """The median milliseconds of a look after ``write()``, which writes 100 reports."""
    times = []
    for _ in range(REPEAT):
        write()
        times.append(timed(lambda: _check(changes.look(), 100)))
    return statistics.median(times)


def _check(look, expected: int) -> None:
    got = len(look.reports) + sum(map(len, look.replaced.values()))
    if got != expected:  # a wrong look would make its time meaningless
        raise RuntimeError(f"a look gave {got} reports, not {expected}")


def main() -> None:
    quick = "--quick" in sys.argv
    sizes, long = ([100, 1000], 200) if quick else ([1000, 10_000], LONG)
    with tempfile.TemporaryDirectory() as folder:
        results = {n: one_size(n, folder, long) for n in sizes}
    keys = list(results[sizes[0]])
    print(f"{'ms a look':32}" + "".join(f"{n:>12,} trials" for n in sizes) + "       ratio")
    for key in keys:
        small, big = results[sizes[0]][key], results[sizes[-1]][key]
        print(f"{key:32}" + "".join(f"{results[n][key]:>19.2f}" for n in sizes)
              + f"{big / small:>11.1f}x")


if __name__ == "__main__":
    main()
