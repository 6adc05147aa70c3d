"""Dominance, fronts, ranks, crowding and hypervolume checked against brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from labkit.experiments.objectives.dominance import (
    crowding_distance,
    dominates,
    hypervolume,
    nondominated_ranks,
    pareto_front,
)


def brute_front(values, modes):
    """The rows no other row dominates, by comparing every pair."""
    keep = []
    for i, a in enumerate(values):
        if np.isnan(a).any():
            continue
        if not any(dominates(b, a, modes) for j, b in enumerate(values)
                   if j != i and not np.isnan(b).any()):
            keep.append(i)
    return keep


def brute_volume(points, reference, modes, grid=60):
    """Hypervolume by counting cells of a fine grid (minimised 2-D or 3-D points)."""
    signs = np.array([-1.0 if m == "max" else 1.0 for m in modes])
    pts, ref = np.asarray(points) * signs, np.asarray(reference) * signs
    low = pts.min(axis=0)
    axes = [np.linspace(lo, hi, grid, endpoint=False) + (hi - lo) / grid / 2
            for lo, hi in zip(low, ref)]
    cells = np.array(list(itertools.product(*axes)))
    covered = np.zeros(len(cells), dtype=bool)
    for p in pts:
        covered |= np.all(cells >= p, axis=1)
    return covered.mean() * np.prod(ref - low)


@pytest.mark.parametrize("k", [2, 3, 4])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_front_and_ranks_match_brute_force(k, seed):
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 6, size=(60, k)).astype(float)  # ties on purpose
    values[3, 0] = np.nan
    modes = tuple(rng.choice(["min", "max"], size=k))
    assert pareto_front(values, modes).tolist() == brute_front(values, modes)
    ranks = nondominated_ranks(values, modes)
    left = [i for i in range(len(values)) if i != 3]
    rank = 0
    while left:
        front = [left[i] for i in brute_front(values[left], modes)]
        assert sorted(np.flatnonzero(ranks == rank).tolist()) == sorted(front)
        left = [i for i in left if i not in front]
        rank += 1
    assert ranks[3] == rank  # a NaN row sorts after every front


@pytest.mark.parametrize("k", [2, 3])
def test_hypervolume_matches_a_grid_count(k):
    rng = np.random.default_rng(k)
    values = rng.uniform(0, 1, size=(25, k))
    modes = ("min",) * (k - 1) + ("max",)
    reference = (1.0,) * (k - 1) + (0.0,)
    exact = hypervolume(values, modes, reference)
    assert exact == pytest.approx(brute_volume(values, reference, modes), rel=0.08)
    assert hypervolume(values[pareto_front(values, modes)], modes, reference) == \
        pytest.approx(exact)
    assert hypervolume(values, modes, (-1.0,) * (k - 1) + (2.0,)) == 0.0  # nothing inside


def test_crowding_puts_the_ends_at_infinity_and_rewards_spread():
    front = np.array([[0.0, 4.0], [1.0, 3.0], [1.1, 2.9], [4.0, 0.0]])
    distance = crowding_distance(front, ("min", "min"))
    assert np.isinf(distance[[0, 3]]).all()
    assert distance[1] > 0 and distance[2] > distance[1] * 0.5
    assert np.isinf(crowding_distance(front[:2], ("min", "min"))).all()
