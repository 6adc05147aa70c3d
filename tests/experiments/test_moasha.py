"""Early stopping by dominance (issue 48): ASHA with several objectives ranks a rung's trials by
non-dominated front, then crowding distance (MOASHA); lk.Median and lk.PBT are refused."""

from __future__ import annotations

import time

import pytest

import labkit as lk
from labkit.errors import InputError
from labkit.experiments.objectives import pareto_front
from labkit.experiments.search.judge import Judge
from labkit.experiments.search.pbt import refuse_several
from labkit.experiments.search.rules import History, check_rule

MODES = ("min", "max")  # (loss, accuracy)

# One rung (step 1), reduction 2.  Worked by hand:
#   t0 (0.5, 0.5)   alone: goes on
#   t1 (0.6, 0.4)   dominated by t0: front 2, 2nd of 2, 1 goes on -> stops
#   t2 (0.2, 0.3)   front 1 with t0 (both ends: infinite crowding), 3 recorded, 2 go on
#   t3 (0.8, 0.9)   front 1 = {t2, t0, t3}; t3 an end (infinite), none ahead -> goes on
#   t4 (0.3, 0.6)   dominates t0; front 1 = {t2, t4, t3}, t4 in the middle, crowding
#                   (0.8-0.2)/0.6 + (0.9-0.3)/0.6 = 2: 2 ahead (the ends), 3 of 5 go on
#   t5 (0.25, 0.45) front 1 = {t2, t5, t4, t3}: crowding of t5 (0.3-0.2)/0.6 + (0.6-0.3)/0.6
#                   = 0.67, of t4 (0.8-0.25)/0.6 + (0.9-0.45)/0.6 = 1.67: 3 ahead, 3 of 6 go
#                   on -> stops, though on the front (its neighbours crowd it)
HAND = [(0.5, 0.5), (0.6, 0.4), (0.2, 0.3), (0.8, 0.9), (0.3, 0.6), (0.25, 0.45)]


def feed(rule, modes, stream):
    """Each ``(trial, step, values)`` to the rule in order; ``{trial: reason}`` of those stopped."""
    history, stopped = History(modes if isinstance(modes, str) else tuple(modes)), {}
    for trial, step, values in stream:
        if trial in stopped:
            continue
        history.add(trial, step, values)
        reason = rule.decide(trial, step, values, history)
        if reason:
            stopped[trial] = reason
    return stopped


def test_the_rung_decision_by_front_then_crowding_matches_the_hand_computed_case():
    stopped = feed(lk.ASHA(min_steps=1, reduction=2), MODES,
                   [(t, 1, v) for t, v in enumerate(HAND)])
    assert sorted(stopped) == [1, 5]
    assert "by dominance" in stopped[1] and "front 2, 2nd of 2" in stopped[1]
    assert "front 1, 4th of 6" in stopped[5] and "at step 1" in stopped[5]
    # by the loss alone (one objective) t5, the 2nd lowest loss of 6, would go on
    alone = feed(lk.ASHA(min_steps=1, reduction=2), "min",
                 [(t, 1, v[0]) for t, v in enumerate(HAND)])
    assert 5 not in alone and 1 in alone


def test_modes_turn_the_order_around():
    # the same values with both objectives minimised: t2 (0.2, 0.3) dominates t0 and t1, which
    # dominate t3 (0.8, 0.9): t3 is alone in front 3, last of 4; the others go on
    stopped = feed(lk.ASHA(min_steps=1, reduction=2), ("min", "min"),
                   [(t, 1, v) for t, v in enumerate(HAND)])
    assert list(stopped) == [3] and "front 3, 4th of 4" in stopped[3]


def test_each_rung_decides_on_the_values_there_and_a_trial_is_judged_once_a_rung():
    rule = lk.ASHA(min_steps=1, reduction=2, max_steps=8)
    stream = []
    for step in (1, 2, 3, 4, 5):
        stream += [(0, step, (1.0, 1.0)), (1, step, (2.0, 0.5) if step < 4 else (3.0, 3.0))]
    stopped = feed(rule, ("min", "min"), stream)
    # rungs at 1, 2, 4: trial 1 is on the front at 1 and 2, dominated at 4
    assert list(stopped) == [1] and "at step 4" in stopped[1]
    assert [len(r) for r in rule.state()["dominance"]] == [2, 2, 2]


def test_the_rungs_by_dominance_are_kept_in_the_state_and_forgotten_on_restart():
    rule = lk.ASHA(min_steps=1, reduction=2)
    feed(rule, MODES, [(t, 1, v) for t, v in enumerate(HAND[:5])])
    revision = rule.revision
    state = rule.state()
    again = lk.ASHA(min_steps=1, reduction=2)
    again.load_state(state)
    history = History(MODES)
    history.add(5, 1, HAND[5])
    assert "front 1, 4th of 6" in again.decide(5, 1, HAND[5], history)
    rule.on_trial_restart(4, 1)  # trial 4 reports from step 1 again: its rung 1 is recorded anew
    assert rule.revision > revision and 4 not in rule.state()["dominance"][0]


def test_the_judge_hands_the_rule_every_objective_of_a_report():
    judge = Judge(lk.ASHA(min_steps=1, reduction=2), "min", "loss", ("loss", "acc"), MODES)
    reports = [(1, {"loss": 0.5, "acc": 0.5}, 0.0)]
    assert judge.value_at(reports, 1, 0.5) == (0.5, 0.5)
    assert judge.value_of({"loss": 0.5}) is None  # an objective missing: no decision
    assert judge.judge(0, 1, (0.5, 0.5), False) is None
    assert "front 2" in judge.judge(1, 1, (0.6, 0.4), False)
    one = Judge(lk.ASHA(), "min", "loss")
    assert one.value_at(reports, 1, 0.5) == 0.5 and not one.several


def test_median_and_pbt_with_several_objectives_are_refused_naming_metric():
    with pytest.raises(InputError, match="lk.Median") as err:
        check_rule(lk.Median(), ("loss", "acc"))
    assert err.value.where["argument"] == "metric"
    assert check_rule(lk.ASHA(), ("loss", "acc")) is not None
    pbt = lk.PBT(interval=2, mutations={"x": lk.uniform(0, 1)})
    with pytest.raises(InputError, match="lk.PBT") as err:
        refuse_several(pbt, ("loss", "acc"))
    assert err.value.where["argument"] == "metric"
    refuse_several(pbt, ("loss",))  # one objective: as ever


# -- a real sweep: a synthetic 2-objective problem, both minimised, on worker threads ----------

STEPS = 9


def two_objectives(config, trial):
    """f1 = a + d, f2 = 1 - a + d at the end, approached as 1/step: d > 0 is dominated."""
    for step in range(1, STEPS + 1):
        late = 1.0 / step  # the same for every trial: a rung's order is the final order
        trial.report(step, f1=config["a"] + config["d"] + late,
                     f2=1.0 - config["a"] + config["d"] + late)
        time.sleep(0.01)
    return {"f1": config["a"] + config["d"], "f2": 1.0 - config["a"] + config["d"]}


# the front (d = 0): two ends; then 8 trials each dominated by both ends and by those before
FRONT = [{"a": 0.25, "d": 0.0}, {"a": 0.75, "d": 0.0}]
DOMINATED = [{"a": 0.5, "d": 0.3 + 0.1 * i} for i in range(8)]


def test_a_sweep_with_two_objectives_stops_dominated_trials_and_keeps_the_front(threads_scheduler):
    result = lk.sweep(two_objectives, FRONT + DOMINATED, metric=("f1", "f2"), mode=("min", "min"),
                      early_stop=lk.ASHA(min_steps=1, reduction=3), store=None,
                      scheduler=threads_scheduler, seed=0)
    records = sorted(result.trials, key=lambda r: r.id)
    front, dominated = records[:2], records[2:]
    for record in front:
        assert record.status == "completed", (record.id, record.status, record.reason)
        assert len(record.history) == STEPS
    stopped = [r for r in dominated if r.status == "stopped"]
    assert len(stopped) >= 6, [(r.id, r.status) for r in dominated]
    for record in stopped:
        assert "by dominance" in record.reason and len(record.history) < STEPS
    # the front of what the trials reported last is the two ends
    last = [(r.history[-1][1]["f1"], r.history[-1][1]["f2"]) for r in records]
    assert pareto_front(last, ("min", "min")).tolist() == [0, 1]
    assert [r.id for r in result.pareto] == [0, 1]


def test_a_sweep_with_two_objectives_refuses_median_naming_metric():
    with pytest.raises(InputError) as err:
        lk.sweep(two_objectives, FRONT, metric=("f1", "f2"), mode=("min", "min"),
                 early_stop=lk.Median(), store=None)
    assert err.value.where["argument"] == "metric"


def _local(path, trials, resume=False):
    return lk.sweep(two_objectives, FRONT + DOMINATED, trials=trials, metric=("f1", "f2"),
                    mode=("min", "min"), early_stop=lk.ASHA(min_steps=1, reduction=3),
                    scheduler=lk.LocalScheduler(), store=path, name="s", seed=0, resume=resume)


def test_a_resumed_sweep_takes_the_rungs_by_dominance_back_from_the_store(tmp_path):
    first = _local(tmp_path / "s.db", 5)
    more = _local(tmp_path / "s.db", 10, resume=True)
    whole = _local(tmp_path / "whole.db", 10)
    assert [t.status for t in more.trials[:5]] == [t.status for t in first.trials]
    # the new trials were judged against the first five's rungs: as in one sweep of ten
    assert [t.status for t in more.trials] == [t.status for t in whole.trials]
    assert [t.status for t in whole.trials][:2] == ["completed", "completed"]
    assert "stopped" in [t.status for t in more.trials[5:]]
