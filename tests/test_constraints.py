"""The argument rules declared once in labkit.constraints: what each accepts, refuses and says."""

from __future__ import annotations

import fractions

import numpy as np
import pytest

from labkit.constraints import (
    FINITE_NUMBER,
    FRACTION,
    NON_NEGATIVE_INT,
    POSITIVE_INT,
    POSITIVE_NUMBER,
    PROBABILITY,
    SECONDS,
    Callable,
    HasMethods,
    InstanceOf,
    Interval,
    Options,
    Satisfies,
    check_argument,
    check_arguments,
    check_parameters,
    describe,
    one_of,
)
from labkit.errors import InputError

NAN, INF = float("nan"), float("inf")

# rule -> (values it accepts, values it refuses)
CASES = {
    "POSITIVE_INT": (POSITIVE_INT, [1, 2, 10**30, np.int64(3)], [0, -1, 1.0, 2.5, "3", None]),
    "NON_NEGATIVE_INT": (NON_NEGATIVE_INT, [0, 1, np.int32(7)], [-1, 0.0, "0", None]),
    "FINITE_NUMBER": (FINITE_NUMBER, [0, -3, 2.5, np.float32(1.5), fractions.Fraction(1, 3)],
                      [NAN, INF, -INF, "1", None, 1j]),
    "POSITIVE_NUMBER": (POSITIVE_NUMBER, [1e-9, 1, 3.5], [0, 0.0, -1, NAN, INF, "2"]),
    "PROBABILITY": (PROBABILITY, [0, 0.0, 0.5, 1, 1.0], [-0.1, 1.01, NAN, INF, "0.5"]),
    "FRACTION": (FRACTION, [0.5, 1e-9, 0.999], [0, 0.0, 1, 1.0, -0.5, NAN]),
    "SECONDS": (SECONDS, [0, 0.5, 30, INF], [-1, -0.1, NAN, "5", None]),
    "one_of": (one_of("auto", "threads"), ["auto", "threads"], ["gpu", None, 1, b"auto"]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_each_declared_rule_accepts_and_refuses(name):
    rule, good, bad = CASES[name]
    for value in good:
        assert rule.accepts(value), f"{name} refuses {value!r}"
    for value in bad:
        assert not rule.accepts(value), f"{name} accepts {value!r}"


@pytest.mark.parametrize(
    "rule", [POSITIVE_INT, NON_NEGATIVE_INT, FINITE_NUMBER, POSITIVE_NUMBER, PROBABILITY,
             FRACTION, SECONDS, Interval(int), Interval(float)])
def test_a_bool_is_never_a_number(rule):
    assert not rule.accepts(True) and not rule.accepts(False)
    assert not rule.accepts(np.bool_(True))


def test_an_option_is_not_a_value_that_only_compares_equal():
    flags = Options((0, 1))
    assert flags.accepts(1) and not flags.accepts(True) and not flags.accepts(1.0)
    assert not Options(("a",)).accepts(np.array(["a", "a"]))  # == raises: no option


def test_nan_is_refused_everywhere_and_infinity_where_finite():
    assert not Interval(float).accepts(NAN) and Interval(float).accepts(INF)
    assert not Interval(float, finite=True).accepts(INF)
    assert not Interval(float, None, None, finite=True).accepts(-INF)
    assert Interval(int, 1).accepts(10**400) and FINITE_NUMBER.accepts(10**400)


def test_the_message_names_the_argument_the_place_and_the_value():
    with pytest.raises(InputError) as info:
        check_argument("batch_size", 0, [POSITIVE_INT], "DataParallelTrainer.fit", epoch=2)
    err = info.value
    assert str(err) == ("DataParallelTrainer.fit: batch_size must be a positive int; "
                        "got 0 (int) [epoch 2, argument batch_size]")
    assert err.where["argument"] == "batch_size" and err.where["epoch"] == 2
    assert isinstance(err, ValueError)


@pytest.mark.parametrize("rule, value, says", [
    (POSITIVE_INT, True, "a positive int; got True (bool)"),
    (NON_NEGATIVE_INT, -1, "an int >= 0; got -1 (int)"),
    (FINITE_NUMBER, NAN, "a finite number; got nan (float)"),
    (POSITIVE_NUMBER, INF, "a positive finite number; got inf (float)"),
    (PROBABILITY, 1.5, "a number >= 0 and <= 1; got 1.5 (float)"),
    (FRACTION, 1, "a number > 0 and < 1; got 1 (int)"),
    (SECONDS, "5", "a number of seconds >= 0; got '5' (str)"),
    (one_of("min", "max"), "mean", "one of 'min', 'max'; got 'mean' (str)"),
])
def test_every_rule_speaks_in_one_shape(rule, value, says):
    with pytest.raises(InputError) as info:
        check_argument("x", value, [rule], "f")
    assert str(info.value) == f"f: x must be {says} [argument x]"


def test_none_is_allowed_only_where_declared_and_said():
    assert check_argument("n", None, [POSITIVE_INT, None]) is None
    with pytest.raises(InputError, match=r"n must be a positive int or None; got 'a'"):
        check_argument("n", "a", [POSITIVE_INT, None])
    with pytest.raises(InputError, match=r"n must be a positive int; got None"):
        check_argument("n", None, [POSITIVE_INT])
    assert describe([POSITIVE_INT, one_of("auto"), None]) == "a positive int, one of 'auto' or None"


def test_a_long_value_is_cut_in_the_message():
    with pytest.raises(InputError) as info:
        check_argument("mode", "x" * 200, [one_of("a")])
    assert "..." in str(info.value) and len(str(info.value)) < 140


def test_check_arguments_checks_each_and_an_undeclared_argument_is_a_programming_error():
    rules = {"n": [POSITIVE_INT], "p": [PROBABILITY]}
    check_arguments(rules, "g", n=3, p=0.5)
    with pytest.raises(InputError, match=r"^g: p must be"):
        check_arguments(rules, "g", n=3, p=2)
    with pytest.raises(KeyError):
        check_arguments(rules, "g", q=1)


def test_check_parameters_reads_the_rules_beside_the_signature():
    class Thing:
        parameter_constraints = {"size": [POSITIVE_INT], "mode": [one_of("a", "b")]}

        def __init__(self, size=1, mode="a"):
            check_parameters(self, locals(), "Thing")

    Thing(2, "b")
    with pytest.raises(InputError, match=r"Thing: size must be a positive int; got 0"):
        Thing(0)


def test_the_other_rules():
    assert InstanceOf(int).accepts(3) and not InstanceOf(int).accepts("3")
    by_name = InstanceOf("fractions.Fraction")
    assert by_name.describe() == "a fractions.Fraction" and by_name.accepts(fractions.Fraction(1))
    assert Callable().accepts(len) and not Callable().accepts(3)
    assert HasMethods(["append"]).accepts([]) and not HasMethods(["append"]).accepts(list)
    odd = Satisfies(lambda v: v % 2 == 1, "an odd int")
    assert odd.accepts(3) and not odd.accepts(2) and not odd.accepts("x")  # a test that raises
    assert repr(odd) == "<Satisfies: an odd int>"


def test_an_interval_takes_int_or_float_only():
    with pytest.raises(TypeError):
        Interval(complex)
