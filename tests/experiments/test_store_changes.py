"""A store read by what changed since the last look (what ``labkit dashboard --store`` polls)."""

from __future__ import annotations

import time

import labkit as lk
from labkit.experiments.store import Store
from labkit.experiments.store_changes import StoreChanges
from tests.experiments import functions as F


def _writer(path: str) -> Store:
    store = Store(path)
    store.create_sweep("s", '{"space": {}}', "loss", "min", 0, {}, now=False)
    store.add_trials("s", [(i, {"x": i}) for i in range(3)])
    store.flush()
    return store


def test_each_look_returns_only_what_changed_since_the_last(tmp_path):
    path = str(tmp_path / "s.db")
    writer = _writer(path)
    reader = Store(path, readonly=True)
    try:
        changes = StoreChanges(reader)
        first = changes.look()
        assert [s["name"] for s in first.sweeps] == ["s"] and len(first.loaded["s"]) == 3
        assert changes.look().trials == [] and changes.look().reports == []   # nothing new
        writer.trial_started("s", 0, 1, "w #0", time.time())
        writer.trial_reports("s", 0, 0, [(0, {"loss": 0.9}, 1.0), (1, {"loss": 0.8}, 2.0)],
                             (0.8, 0.8, 1))
        writer.flush()
        look = changes.look()
        assert [(r["id"], r["status"], r["value"]) for r in look.trials] == [(0, "running", 0.8)]
        assert look.reports == [("s", 0, 0, {"loss": 0.9}), ("s", 0, 1, {"loss": 0.8})]
        writer.trial_finished("s", 0, "completed", {"loss": 0.8}, 0.8, 0.8, 1, ended=time.time())
        writer.flush()
        look = changes.look()
        assert [(r["id"], r["status"]) for r in look.trials] == [(0, "completed")]
        assert look.reports == []
        assert changes.look().trials == []               # read again (just ended), not returned
        # a restart drops the reports after its checkpoint: the trial's reports come whole
        writer.trial_started("s", 1, 1, "w #0", time.time())
        writer.trial_reports("s", 1, 0, [(s, {"loss": 1.0 - s / 10}, 1.0) for s in range(3)])
        writer.flush()
        changes.look()
        writer.drop_reports("s", 1, 1)
        writer.trial_started("s", 1, 2, "w #1", time.time())
        writer.trial_reports("s", 1, 1, [(1, {"loss": 0.5}, 3.0)])
        writer.flush()
        look = changes.look()
        assert look.replaced == {("s", 1): [(0, {"loss": 1.0}), (1, {"loss": 0.5})]}
        # a sweep begun later is read whole; a live claim says it runs
        writer.create_sweep("t", '{"space": {}}', "acc", "max", 0, {}, now=False)
        writer.add_trials("t", [(0, {"y": 1})])
        writer.flush()
        assert writer.claim("t", "me") is None
        look = changes.look()
        assert [s["name"] for s in look.sweeps] == ["t"] and look.loaded["t"][0]["id"] == 0
        assert look.running == {"s": False, "t": True}
    finally:
        writer.close()
        reader.close()


def _opened(path: str, name: str, run) -> Store:
    """The store at ``path`` read-only, once the sweep ``name`` is in it."""
    while True:
        try:
            reader = Store(path, readonly=True)
        except lk.StorageError:  # not made yet
            run.wait(0.05)
            continue
        if name in reader.sweep_names():
            return reader
        reader.close()
        run.wait(0.05)


def test_a_real_sweeps_looks_add_up_to_its_result(tmp_path):
    path = str(tmp_path / "real.db")
    reader = None
    with lk.DaskScheduler(mode="threads", n_workers=1, threads_per_worker=2) as s:
        run = lk.sweep(F.curve, {"q": lk.uniform(0.5, 1.0), "pause": 0.02, "steps": 6},
                       trials=10, metric="acc", mode="max", scheduler=s, store=path,
                       name="real", wait=False)
        try:
            reader = _opened(path, "real", run)
            changes = StoreChanges(reader)
            rows, curves = {}, {}
            looks = [changes.look()]
            while not run.done():
                run.wait(0.2)
                looks.append(changes.look())
            result = run.result()
            looks.append(changes.look())
        finally:
            if reader is not None:
                reader.close()
    for look in looks:
        for row in look.loaded.get("real", ()):
            rows[row["id"]] = row
            curves[row["id"]] = [(st, m) for st, m, *_ in row["history"]]
        for row in look.trials:
            rows[row["id"]] = row
        for (_, trial), reports in look.replaced.items():
            curves[trial] = list(reports)
        for _, trial, step, metrics in look.reports:
            curve = curves.setdefault(trial, [])
            curves[trial] = [p for p in curve if p[0] < step] + [(step, metrics)]
    for t in result.trials:
        assert rows[t.id]["status"] == "completed" and rows[t.id]["value"] == t.value
        assert curves[t.id] == [(st, m) for st, m, _ in t.history]
    assert len(looks) >= 3
