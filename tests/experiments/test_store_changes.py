"""A store read by what changed since the last look (what ``labkit dashboard --store`` polls)."""

from __future__ import annotations

import os
import shutil
import time

import labkit as lk
from labkit.experiments.store.database import Store
from labkit.experiments.store.changes import StoreChanges
from tests.experiments import functions as F

DATA = os.path.join(os.path.dirname(__file__), "data")


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


def test_reports_written_under_a_row_id_a_compaction_freed_still_come(tmp_path):
    """A trial's packs become one when it ends; the next pack of another trial may take a
    row id the reader had seen already: it is found all the same (that trial runs)."""
    path = str(tmp_path / "s.db")
    writer = _writer(path)
    reader = Store(path, readonly=True)
    try:
        for trial in (0, 1):
            writer.trial_started("s", trial, 1, "w #0", time.time())
        writer.trial_reports("s", 1, 1, [(0, {"loss": 0.7}, 1.0)])
        writer.flush()
        for step in range(3):  # three commits: three packs, the newest rows of the table
            writer.trial_reports("s", 0, 1, [(step, {"loss": 1.0 / (step + 1)}, 1.0 + step)])
            writer.flush()
        changes = StoreChanges(reader)
        changes.look()
        newest = reader.read("SELECT MAX(rowid) AS r FROM report_packs")[0]["r"]
        writer.trial_finished("s", 0, "completed", {"loss": 1 / 3}, 1 / 3, 1 / 3, 2,
                              ended=time.time())
        writer.flush()
        writer.trial_reports("s", 1, 1, [(1, {"loss": 0.6}, 5.0)])
        writer.flush()
        packs = reader.read("SELECT rowid, trial, n FROM report_packs ORDER BY rowid")
        assert [(p["trial"], p["n"]) for p in packs] == [(1, 1), (0, 3), (1, 1)]
        assert packs[-1]["rowid"] <= newest                # the row id was taken again
        look = changes.look()
        assert look.reports == [("s", 1, 1, {"loss": 0.6})] and look.replaced == {}
        assert [(r["id"], r["status"]) for r in look.trials] == [(0, "completed")]
        assert changes.look().reports == []
    finally:
        writer.close()
        reader.close()


def test_reports_after_reads_only_what_a_reader_has_not_had(tmp_path):
    store = _writer(str(tmp_path / "s.db"))
    try:
        for step in range(4):  # four packs of two reports
            store.trial_reports("s", 2, 1, [(2 * step + k, {"loss": 2 * step + k}, 0.0)
                                            for k in range(2)])
            store.flush()
        got = store.reports_after({("s", 2): (5, None), ("s", 1): (0, None), ("s", 0): (3, None)})
        steps = {key: (n, [r[0] for r in reports]) for key, (n, _, reports) in got.items()}
        assert steps == {("s", 2): (8, [5, 6, 7]),   # after the first five: from the third pack
                         ("s", 1): (0, []),
                         ("s", 0): (0, [])}          # had three, has none: all (none) of them
        at = got[("s", 2)][1]
        assert store.reports_after({("s", 2): (8, at)})[("s", 2)] == (8, at, [])
        store.trial_reports("s", 2, 1, [(8, {"loss": 8}, 0.0)])
        store.flush()
        n, at, reports = store.reports_after({("s", 2): (8, at)})[("s", 2)]
        assert (n, reports) == (9, [(8, {"loss": 8}, 0.0)])   # only the row after ``at``
        mark, named = store.reported_after(None)
        assert named == set() and store.reported_after(mark) == (mark, set())
        store.trial_reports("s", 1, 1, [(0, {"loss": 1.0}, 0.0)])
        store.flush()
        assert store.reported_after(mark)[1] == {("s", 1)}
    finally:
        store.close()


def test_a_version_1_store_is_followed_before_and_after_another_opener_migrates_it(tmp_path):
    path = str(tmp_path / "old.db")
    shutil.copy(os.path.join(DATA, "store_v1.db"), path)
    reader = Store(path, readonly=True)                    # read as version 1 wrote it
    try:
        changes = StoreChanges(reader)
        first = changes.look()
        histories = {r["id"]: r["history"] for r in first.loaded["asha"]}
        assert sum(map(len, histories.values())) > 0
        assert [s["name"] for s in first.sweeps] == ["asha", "mixed"]
        writer = Store(path)                               # a resumed sweep: migrated
        try:
            look = changes.look()
            assert (look.reports, look.replaced) == ([], {})
            writer.add_trials("asha", [(6, {"q": 0.5})])
            writer.trial_started("asha", 6, 1, "w #0", time.time())
            writer.trial_reports("asha", 6, 1, [(0, {"acc": 0.5}, 9.0)])
            writer.trial_reports("asha", 5, 1, [(99, {"acc": 0.75}, 9.0)])  # a late one
            writer.flush()
            look = changes.look()
            assert look.replaced == {} and look.reports == [
                ("asha", 5, 99, {"acc": 0.75}), ("asha", 6, 0, {"acc": 0.5})]
            assert [(r["id"], r["status"]) for r in look.trials] == [(6, "running")]
        finally:
            writer.close()
    finally:
        reader.close()


def test_a_version_1_store_read_only_gives_new_reports_by_its_rows(tmp_path):
    """A store another (older) labkit writes as version 1: its report rows, read by count."""
    import sqlite3
    path = str(tmp_path / "old.db")
    shutil.copy(os.path.join(DATA, "store_v1.db"), path)
    reader = Store(path, readonly=True)
    try:
        changes = StoreChanges(reader)
        changes.look()
        with sqlite3.connect(path) as conn:                # as the version 1 writer did
            conn.execute("INSERT INTO reports VALUES ('asha', 0, 50, '{\"acc\": 0.25}', 9.0, 1)")
        conn.close()
        look = changes.look()
        assert look.reports == [("asha", 0, 50, {"acc": 0.25})] and look.replaced == {}
        assert changes.look().reports == []
    finally:
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
