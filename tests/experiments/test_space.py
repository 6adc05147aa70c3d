"""Search spaces: seeded draws (same seed, same configurations), grids, lists, bad input."""

from __future__ import annotations

import math
import threading

import pytest

import labkit as lk
from labkit.experiments.search.space import Space

SPACE = {"lr": lk.loguniform(1e-4, 1e-1), "width": lk.choice([64, 128, 256]),
         "layers": lk.randint(1, 4), "dropout": lk.uniform(0, 0.5), "epochs": 20}


def test_the_same_seed_draws_the_same_configurations_in_any_order():
    space = Space.of(SPACE)
    first = [space.configuration(i, seed=0) for i in range(20)]
    again = [space.configuration(i, seed=0) for i in reversed(range(20))][::-1]
    assert first == again
    assert first != [space.configuration(i, seed=1) for i in range(20)]
    assert len({c["lr"] for c in first}) == 20          # trials differ from each other


def test_a_space_written_in_another_order_draws_the_same():
    other = Space.of(dict(reversed(list(SPACE.items()))))
    assert all(other.configuration(i, 3) == Space.of(SPACE).configuration(i, 3)
               for i in range(5))


def test_draws_stay_in_their_ranges():
    space = Space.of(SPACE)
    configs = [space.configuration(i, seed=7) for i in range(400)]
    assert all(1e-4 <= c["lr"] <= 1e-1 for c in configs)
    assert {c["width"] for c in configs} == {64, 128, 256}
    assert {c["layers"] for c in configs} == {1, 2, 3}      # hi is left out, as numpy's
    assert all(0 <= c["dropout"] <= 0.5 for c in configs)
    assert all(c["epochs"] == 20 for c in configs)
    logs = sorted(math.log10(c["lr"]) for c in configs)
    assert -3.0 < logs[len(logs) // 2] < -2.0                # uniform on a log scale


def test_a_grid_runs_every_point_then_repeats_with_fresh_draws():
    space = Space.of(lk.grid(lr=[0.1, 0.01], width=[64, 128], dropout=lk.uniform(0, 1)))
    assert space.size == 4
    points = [space.configuration(i, 0) for i in range(8)]
    assert {(p["lr"], p["width"]) for p in points[:4]} == {(0.1, 64), (0.1, 128),
                                                           (0.01, 64), (0.01, 128)}
    assert [(p["lr"], p["width"]) for p in points[4:]] == [(p["lr"], p["width"])
                                                           for p in points[:4]]
    assert points[0]["dropout"] != points[4]["dropout"]


def test_a_list_of_configurations_is_run_as_given():
    space = Space.of([{"a": 1}, {"a": 2, "b": "x"}])
    assert space.size == 2 and space.configuration(1, 0) == {"a": 2, "b": "x"}


def test_a_description_makes_the_same_space_again():
    for given in (SPACE, lk.grid(lr=[0.1, 0.01], depth=lk.randint(1, 3)), [{"a": 1}]):
        space = Space.of(given)
        back = Space.from_description(space.describe())
        assert back.key() == space.key()
        i = 0 if space.kind == "list" else 2
        assert back.configuration(i, 5) == space.configuration(i, 5)


@pytest.mark.parametrize("space, parameter, words", [
    ({"lr": lk.loguniform(0, 1)}, "lr", "0 < lo"),
    ({"lr": lk.loguniform(-1, 1)}, "lr", "0 < lo"),
    ({"lr": lk.loguniform(1e-1, 1e-4)}, "lr", "reversed range"),
    ({"p": lk.uniform(0.5, 0.5)}, "p", "empty range"),
    ({"p": lk.uniform(1, 0)}, "p", "reversed range"),
    ({"p": lk.uniform(0, float("nan"))}, "p", "finite"),
    ({"n": lk.randint(4, 1)}, "n", "reversed range"),
    ({"n": lk.randint(2, 2)}, "n", "empty range"),
    ({"n": lk.randint(1, 2.5)}, "n", "integers"),
    ({"w": lk.choice([])}, "w", "at least one option"),
    ({"w": lk.choice(5)}, "w", "list of options"),
    (lambda: lk.grid(w=[]), "w", "at least one value"),
    ({"lock": threading.Lock()}, "lock", "cannot be pickled"),
    ({"w": lk.choice([1, threading.Lock()])}, "w", "cannot be pickled"),
    ([{"a": 1}, {"a": threading.Lock()}], "a", "cannot be pickled"),
])
def test_bad_spaces_are_refused_naming_the_parameter(space, parameter, words):
    with pytest.raises(lk.InputError) as info:
        Space.of(space() if callable(space) else space).check_pickles()
    assert info.value.where["argument"] == parameter
    assert words in str(info.value) and repr(parameter) in str(info.value)


@pytest.mark.parametrize("space", [{}, [], 5, "lr", [{"a": 1}, 3], {1: lk.uniform(0, 1)}])
def test_spaces_that_are_not_spaces_are_refused(space):
    with pytest.raises(lk.InputError):
        Space.of(space)
