"""Early-stopping rules on synthetic report streams: ASHA's rungs, the median rule, modes."""

from __future__ import annotations

import math

import pytest

import labkit as lk
from labkit.experiments.search.rules import History


def feed(rule, mode, stream):
    """Each ``(trial, step, value)`` to the rule in order; ``{trial: reason}`` of those stopped."""
    history, stopped = History(mode), {}
    for trial, step, value in stream:
        if trial in stopped:
            continue
        history.add(trial, step, value)
        reason = rule.decide(trial, step, value, history)
        if reason:
            stopped[trial] = reason
    return stopped


def test_asha_keeps_the_top_third_of_those_that_reached_a_rung_so_far():
    # with n trials recorded at the rung, the best ceil(n/3) go on
    values = [0.5, 0.9, 0.1, 0.8, 0.95, 0.2]
    stopped = feed(lk.ASHA(min_steps=1, reduction=3), "max",
                   [(t, 1, v) for t, v in enumerate(values)])
    assert sorted(stopped) == [2, 5]
    assert "top 1/3" in stopped[2] and "3rd of 3" in stopped[2]
    # trials each worse than all before: only the first goes on
    worse = feed(lk.ASHA(min_steps=1, reduction=3), "max", [(t, 1, -t) for t in range(9)])
    assert sorted(worse) == list(range(1, 9))


def test_asha_never_waits_for_stragglers_and_better_late_trials_go_on():
    stream = [(t, 1, t / 10) for t in range(9)]   # each better than all before it
    assert feed(lk.ASHA(min_steps=1, reduction=3), "max", stream) == {}


def test_asha_in_mode_min_keeps_the_lowest():
    stream = [(0, 1, 5.0), (1, 1, 1.0), (2, 1, 9.0)]
    stopped = feed(lk.ASHA(min_steps=1, reduction=2), "min", stream)
    assert sorted(stopped) == [2]


def test_asha_rungs_lie_at_min_steps_times_powers_of_the_reduction_below_max_steps():
    rule = lk.ASHA(min_steps=2, reduction=3, max_steps=20)
    assert [rule.rung(k) for k in range(4)] == [2, 6, 18, 54]
    # trial 0 is excellent everywhere; trial 1 is good early and bad at step 6
    stream = [(0, s, 1.0) for s in range(30)] + [(1, s, 1.0 if s < 6 else 0.0)
                                                 for s in range(30)]
    stopped = feed(rule, "max", stream)
    assert list(stopped) == [1] and "at step 6" in stopped[1]
    # no rung at or beyond max_steps: a trial bad only from step 18 on is never stopped
    late = [(0, s, 1.0) for s in range(30)] + [(1, s, 1.0 if s < 18 else 0.0)
                                               for s in range(30)]
    assert feed(lk.ASHA(min_steps=2, reduction=3, max_steps=18), "max", late) == {}


def test_asha_does_not_stop_before_the_first_rung_and_nan_is_worst():
    rule = lk.ASHA(min_steps=3, reduction=2)
    stream = [(0, 0, 1.0), (1, 0, -5.0), (0, 3, 1.0), (1, 3, float("nan"))]
    stopped = feed(rule, "max", stream)
    assert list(stopped) == [1] and "at step 3" in stopped[1]


def test_the_median_rule_stops_a_trial_below_the_median_of_running_means():
    rule = lk.Median(min_steps=2, min_trials=3)
    good = [(t, s, 0.8 + 0.01 * s) for t in range(3) for s in range(5)]
    bad = [(3, s, 0.5) for s in range(5)]
    stopped = feed(rule, "max", good + bad)
    assert list(stopped) == [3] and "at step 2" in stopped[3] and "median" in stopped[3]
    # with fewer than min_trials others at the step, nobody is judged
    assert feed(lk.Median(min_steps=0, min_trials=4), "max", good + bad) == {}


def test_the_median_rule_in_mode_min():
    others = [(t, s, 1.0) for t in range(3) for s in range(3)]
    stopped = feed(lk.Median(min_steps=1, min_trials=3), "min", others + [(3, s, 2.0)
                                                                         for s in range(3)])
    assert list(stopped) == [3]


def test_history_running_means_and_truncation():
    history = History("min")
    for step, value in enumerate([4.0, 2.0, 0.0]):
        history.add(7, step, value)
    assert history.score(2.0) == -2.0 and history.score(float("nan")) == -math.inf
    assert history.running_mean(7, 1) == -3.0 and history.best(7) == 0.0
    history.truncate(7, 1)
    assert history.curve(7) == [(0, -4.0)] and history.last_step(7) == 0


@pytest.mark.parametrize("make, argument", [
    (lambda: lk.ASHA(min_steps=0), "min_steps"),
    (lambda: lk.ASHA(reduction=1), "reduction"),
    (lambda: lk.ASHA(reduction="3"), "reduction"),
    (lambda: lk.ASHA(max_steps=-2), "max_steps"),
    (lambda: lk.Median(min_steps=-1), "min_steps"),
    (lambda: lk.Median(min_trials=0), "min_trials"),
])
def test_bad_rule_arguments_are_refused_naming_them(make, argument):
    with pytest.raises(lk.InputError) as info:
        make()
    assert info.value.where["argument"] == argument


def test_asha_ranks_as_a_count_over_every_recorded_trial_would_with_forgets_and_ties():
    """ASHA's rank by binary search agrees with counting every better score, decision by decision."""
    import random

    class Scores:  # the sweep's history as ASHA reads it: a score per value (mode "min")
        def score(self, value):
            return -math.inf if math.isnan(value) else -value

    rng = random.Random(0)
    asha, recorded = lk.ASHA(min_steps=1, reduction=3), [{} for _ in range(3)]
    for trial in range(2000):
        for k, step in enumerate((1, 3, 9)):
            value = rng.choice([rng.random(), float("nan"), 0.5])   # ties and NaN (worst)
            said = asha.decide(trial, step, value, Scores())
            score = Scores().score(value)
            recorded[k][trial] = score
            better = sum(1 for s in recorded[k].values() if s > score)
            assert (said is not None) == (better >= math.ceil(len(recorded[k]) / 3)), (trial, k)
            if rng.random() < 0.05:                     # a restart from step 3 forgets rungs 1, 2
                asha.on_trial_restart(trial, 3)
                for rung in recorded[1:]:
                    rung.pop(trial, None)
            if said:
                break
    again = lk.ASHA(min_steps=1, reduction=3)
    again.load_state(asha.state())
    assert again.state() == asha.state()
    assert again.decide(10**6, 1, 2.0, Scores()) == asha.decide(10**6, 1, 2.0, Scores())
