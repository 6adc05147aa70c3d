"""split_batch: MXNet's rounding rules and every error."""

import pytest

import labkit as lk
from labkit.data_parallel.split import shares


def sizes(slices):
    return [s.stop - s.start for s in slices]


@pytest.mark.parametrize("batch, load, expected", [
    (10, [1, 2, 3], [2, 3, 5]),
    (10, [1, 1, 2], [2, 2, 6]),      # 2.5 rounds to 2 twice: the shortfall goes to the last
    (7, [1, 1], [4, 3]),             # 3.5 rounds up twice: the split stops at the batch's end
    (9, [1, 1, 1], [3, 3, 3]),
    (3, [1, 1, 1], [1, 1, 1]),
    (100, [0.5, 1.5], [25, 75]),
    (5, [1], [5]),
])
def test_sizes(batch, load, expected):
    slices = lk.split_batch(batch, load)
    assert sizes(slices) == expected
    assert slices[0].start == 0 and slices[-1].stop == batch
    assert all(a.stop == b.start for a, b in zip(slices, slices[1:]))


def test_an_empty_device_is_named():
    with pytest.raises(lk.InputError, match="leaves no rows") as info:
        lk.split_batch(2, [1, 1, 1], devices=["cuda:0", "cuda:1", "cpu"])
    assert info.value.where["device"] == "cpu"
    with pytest.raises(lk.InputError) as info:
        lk.split_batch(10, [100, 1])
    assert info.value.where["device"] == 1
    assert shares(10, [100, 1]) == [10, 0]


@pytest.mark.parametrize("load, match", [
    ([1, 0], "positive"), ([1, -2], "positive"), ([1, float("nan")], "positive"),
    ([1, float("inf")], "positive"), ([1, "2"], "positive"), ([True, 1], "positive"),
    ([], "empty"), (5, "list of numbers"),
])
def test_bad_work_loads(load, match):
    with pytest.raises(lk.InputError, match=match):
        lk.split_batch(10, load)


def test_work_load_length_must_match_devices_and_batch_must_be_positive():
    with pytest.raises(lk.InputError, match="2 entries for 3 devices"):
        lk.split_batch(10, [1, 1], devices=["a", "b", "c"])
    for bad in (0, -1, 2.5, True):
        with pytest.raises(lk.InputError, match="batch_size"):
            lk.split_batch(bad, [1])
