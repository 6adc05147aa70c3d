"""Early-stopping rules' lifecycle hooks, and their state kept in the store (resume without replay)."""

from __future__ import annotations

import labkit as lk
from labkit.experiments.search.judge import Judge
from tests.experiments import functions as F

SPACE = {"q": lk.uniform(0.5, 1.0), "steps": 5}


class CountingASHA(lk.ASHA):
    """ASHA that notes every decision and every hook (class-level: a sweep copies its rule)."""

    CALLS: list = []

    def decide(self, trial, step, value, history):
        self.CALLS.append(("decide", trial, step))
        return super().decide(trial, step, value, history)

    def on_trial_add(self, trial):
        self.CALLS.append(("add", trial))

    def on_trial_end(self, trial, status):
        self.CALLS.append(("end", trial, status))


class PlainRule:
    """A user's rule as the README writes one: only ``decide``, no base class, no state."""

    CALLS: list = []

    def decide(self, trial, step, value, history):
        self.CALLS.append((trial, step))
        return None


def _sweep(path, trials, rule, resume=False):
    return lk.sweep(F.curve, SPACE, trials=trials, metric="acc", mode="max", seed=3,
                    early_stop=rule, store=path, name="s", resume=resume)


def test_hooks_hear_each_trial_added_and_ended(tmp_path):
    CountingASHA.CALLS.clear()
    result = _sweep(tmp_path / "s.db", 4, CountingASHA(min_steps=1, reduction=2))
    calls = CountingASHA.CALLS
    assert sorted(c[1] for c in calls if c[0] == "add") == [0, 1, 2, 3]
    ended = {c[1]: c[2] for c in calls if c[0] == "end"}
    assert ended == {t.id: t.status for t in result.trials}


def test_a_resumed_sweep_takes_the_rules_records_from_the_store_without_replay(tmp_path):
    path = tmp_path / "s.db"
    first = _sweep(path, 6, lk.ASHA(min_steps=1, reduction=2))
    CountingASHA.CALLS.clear()
    rule = CountingASHA(min_steps=1, reduction=2)
    more = _sweep(path, 9, rule, resume=True)
    decided = {c[1] for c in CountingASHA.CALLS if c[0] == "decide"}
    assert decided == {6, 7, 8}                      # no report of the first six replayed
    assert [t.status for t in more.trials[:6]] == [t.status for t in first.trials]
    # the new trials were compared with the first six: as one sweep of nine would have been
    whole = _sweep(tmp_path / "whole.db", 9, lk.ASHA(min_steps=1, reduction=2))
    assert [t.status for t in more.trials] == [t.status for t in whole.trials]


def test_a_rule_without_state_is_rebuilt_by_replay_on_resume(tmp_path):
    path = tmp_path / "s.db"
    _sweep(path, 3, PlainRule())
    PlainRule.CALLS.clear()
    _sweep(path, 4, PlainRule(), resume=True)
    assert {t for t, _ in PlainRule.CALLS} == {0, 1, 2, 3}   # the old ones replayed, as ever


def test_asha_forgets_the_rungs_a_restarted_trial_reports_again():
    judge = Judge(lk.ASHA(min_steps=1, reduction=3), "max", "acc")
    for step in (1, 3, 9):
        judge.judge(0, step, 0.5, stopping=False)
    assert [sorted(r) for r in judge.rule.state()["rungs"]] == [["0"], ["0"], ["0"]]
    judge.on_trial_restart(0, from_step=2)                    # it reports from step 2 on again
    assert [sorted(r) for r in judge.rule.state()["rungs"]] == [["0"], [], []]
    assert judge.history.last_step(0) == 1
    judge.judge(0, 3, 0.4, stopping=False)
    assert judge.rule.state()["rungs"][1] == {"0": 0.4}


def test_the_judge_hands_over_the_state_only_when_it_changed():
    judge = Judge(lk.ASHA(min_steps=2, reduction=2), "min", "loss")
    assert judge.keeps and judge.take_state() is None
    judge.judge(0, 0, 1.0, stopping=False)          # before the first rung: nothing recorded
    judge.judge(0, 1, 0.9, stopping=False)
    assert judge.take_state() is None
    judge.judge(0, 2, 0.8, stopping=False)
    judge.judge(0, 3, 0.7, stopping=False)
    assert judge.take_state()["state"]["rungs"] == [{"0": -0.8}]
    assert judge.take_state() is None                 # taken: nothing new until it changes
    judge.judge(1, 2, 0.5, stopping=False)
    assert judge.take_state()["state"]["rungs"] == [{"0": -0.8, "1": -0.5}]
