"""A sweep kept in memory (``store=None``) writes nothing per trial (issue 48, the cost of a trial).

Its result and events come from the engine's records; the in-memory store keeps only what the
sweep reads back (its checkpoints' references, the claim, the rule's state, exploits), and a
sweep's trials' rows only where ``keep_best`` ranks its checkpoints by them.
"""

from __future__ import annotations

import os

import pytest

import labkit as lk
from tests.experiments import checkpoint_functions as cf

SPACE = {"x": lk.uniform(0, 1), "y": lk.uniform(0, 1)}

#: The statements that write a trial's row or its reports.
PER_TRIAL = ("UPDATE trials", "INSERT OR IGNORE INTO trials", "INSERT INTO report_packs",
             "DELETE FROM report_packs", "SELECT rowid, data FROM report_packs")


def reporting(config, trial):
    """Three reports, then the final metric."""
    for step in range(3):
        trial.report(step, loss=config["x"] + 1.0 / (step + 1))
    return {"loss": config["x"], "y": config["y"]}


def _per_trial(seen: list[str]) -> list[str]:
    return [s for s in seen if s.lstrip().startswith(PER_TRIAL)]


def _facts(result) -> list[tuple]:
    return [(t.id, t.config, str(t.status), t.value, t.best, t.step, t.metrics, t.attempts,
             [(s, m) for s, m, _ in t.history]) for t in result.trials]


def test_a_sweep_kept_in_memory_writes_no_trial_s_row_nor_its_reports(statements, tmp_path):
    result = lk.sweep(reporting, SPACE, trials=30, metric="loss", mode="min", seed=3,
                      store=None, early_stop=lk.ASHA(min_steps=1, max_steps=3, reduction=2))
    assert len(result.trials) == 30 and result.counts().get("completed")
    assert all(len(t.history) >= 1 for t in result.trials)
    assert _per_trial(statements) == []        # today: 3 UPDATEs a trial, and its reports' packs
    # the same sweep in a file: its result is the same, and the file holds every trial
    filed = lk.sweep(reporting, SPACE, trials=30, metric="loss", mode="min", seed=3,
                     store=tmp_path / "s.db", name="f",
                     early_stop=lk.ASHA(min_steps=1, max_steps=3, reduction=2))
    assert _per_trial(statements)              # a file's store writes them, as before
    assert _facts(result) == _facts(filed) == _facts(lk.load_sweep(tmp_path / "s.db", "f"))


def test_a_sweep_kept_in_memory_with_keep_best_keeps_only_the_best_checkpoints(tmp_path):
    # keep_best ranks the ended trials by their rows: a sweep that keeps its best writes them
    configs = [{"x": x, "mb": 1, "epochs": 2} for x in (0.5, 0.1, 0.4, 0.2)]
    folder = tmp_path / "checkpoints"
    result = lk.sweep(cf.big_state, configs, metric="loss", mode="min", store=None,
                      checkpoints=str(folder), keep_best=2)
    assert result.counts() == {"completed": 4}
    kept = sorted(int(os.path.basename(where).removeprefix("trial-"))
                  for where, _, names in os.walk(folder) if names)
    assert kept == [1, 3]                      # x = 0.1 and 0.2


def test_an_in_memory_store_keeps_what_the_sweep_reads_back():
    from labkit.experiments.store.memory import MemoryStore
    from labkit.experiments.trials.checkpoint_place import CheckpointRef

    store = MemoryStore()
    try:
        store.create_sweep("s", "{}", "loss", "min", 0, {}, now=False)
        store.add_trials("s", [(0, {"x": 1})])
        store.trial_started("s", 0, 1, "w", 1.0)
        store.trial_reports("s", 0, 1, [(0, {"loss": 1.0}, 1.0)], (1.0, 1.0, 0))
        store.save_checkpoint("s", 0, 1, 0, CheckpointRef("k", 0, 3, "d"))
        store.flush()
        assert store.trials("s") == [] and store.reports("s") == {}
        assert store.checkpoint("s", 0)[0].key == "k"  # a rerun (or PBT's donor) restores it
        assert store.sweep("s")["metric"] == "loss"
    finally:
        store.close()
