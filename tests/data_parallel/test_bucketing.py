"""lk.bucket_batches: each sample once a pass, padding and keys, shuffling, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import labkit as lk

BUCKETS = [10, 20, 40]


def sequences(n=50, low=1, high=40, seed=0):
    """``n`` integer sequences of lengths in ``[low, high]``; sequence i holds i+1 at every step."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(low, high + 1, n)
    return [np.full(int(k), i + 1, dtype=np.int64) for i, k in enumerate(lengths)]


def test_every_sample_exactly_once_a_pass_in_padded_batches_keyed_by_bucket():
    seqs = sequences()
    targets = np.arange(len(seqs)) * 10
    batches = lk.bucket_batches(seqs, targets, buckets=BUCKETS, batch_size=8, pad_value=-1)
    for _ in range(2):  # a second pass too: fit iterates once an epoch
        seen = []
        for b in batches:
            assert isinstance(b, lk.BucketBatch) and b.key in BUCKETS
            assert b.x.shape == (len(b), b.key) and 1 <= len(b) <= 8
            longest = int(b.lengths.max())
            assert b.key == min(k for k in BUCKETS if k >= longest)
            for row, i, n in zip(b.x, b.index.tolist(), b.lengths.tolist()):
                assert n == len(seqs[i])
                assert (row[:n] == i + 1).all() and (row[n:] == -1).all()
            assert b.y.tolist() == [10 * i for i in b.index.tolist()]
            seen += b.index.tolist()
        assert sorted(seen) == list(range(len(seqs)))
    assert len(batches) == len(list(batches))
    assert batches.counts() == {k: sum(1 for s in seqs if k == min(b for b in BUCKETS
                                                                     if b >= len(s)))
                                for k in BUCKETS}


def test_batches_are_formed_within_a_bucket_in_order_without_shuffle():
    seqs = [torch.ones(n) for n in (3, 12, 4, 30, 15, 2)]
    batches = list(lk.bucket_batches(seqs, torch.arange(6), buckets=[5, 20, 40], batch_size=2))
    assert [(b.key, b.index.tolist()) for b in batches] == \
        [(5, [0, 2]), (5, [5]), (20, [1, 4]), (40, [3])]
    assert batches[0].x.dtype == torch.float32
    assert len(lk.bucket_batches(seqs, torch.arange(6), [5, 20, 40], 2, drop_last=True)) == 2


def test_shuffling_is_seeded_and_new_each_pass():
    seqs, targets = sequences(60), np.arange(60)

    def order(batches):
        return [tuple(b.index.tolist()) for b in batches]

    a = lk.bucket_batches(seqs, targets, BUCKETS, 4, shuffle=True, seed=3)
    b = lk.bucket_batches(seqs, targets, BUCKETS, 4, shuffle=True, seed=3)
    first, second = order(a), order(a)
    assert first == order(b) and second == order(b)  # the same seed, the same passes
    assert first != second  # a new order each pass ...
    assert sorted(sum(first, ())) == sorted(sum(second, ())) == list(range(60))  # ... all once
    keys = [batch.key for batch in a]
    assert keys != sorted(keys)  # the buckets are interleaved, not one after the other
    other = order(lk.bucket_batches(seqs, targets, BUCKETS, 4, shuffle=True, seed=4))
    assert other != first


@pytest.mark.parametrize("shape", [(), (3,), (2, 5)])
def test_targets_of_any_trailing_shape(shape):
    seqs = sequences(20)
    targets = torch.arange(20 * int(np.prod(shape)), dtype=torch.float64).reshape(20, *shape)
    for b in lk.bucket_batches(seqs, targets, BUCKETS, 6):
        assert b.y.shape == (len(b), *shape)
        assert torch.equal(b.y, targets[b.index])


def test_sequences_of_vectors_are_padded_to_the_key():
    seqs = [torch.randn(n, 3) for n in (2, 6, 9)]
    [small, big] = list(lk.bucket_batches(seqs, [0, 1, 2], buckets=[4, 10], batch_size=4,
                                          pad_value=0.5))
    assert small.x.shape == (1, 4, 3) and big.x.shape == (2, 10, 3)
    assert torch.equal(big.x[1, :9], seqs[2]) and (big.x[0, 6:] == 0.5).all()


def test_a_too_long_sequence_is_named_or_dropped_with_a_warning():
    seqs = sequences(10, high=30) + [np.ones(45), np.ones(50)]
    with pytest.raises(lk.InputError, match="sequence 10 has length 45") as info:
        lk.bucket_batches(seqs, np.arange(12), BUCKETS, 4)
    assert info.value.where["index"] == 10 and info.value.where["length"] == 45
    assert "drop_longer=True" in str(info.value)
    with pytest.warns(RuntimeWarning, match="dropped 2 sequences"):
        batches = lk.bucket_batches(seqs, np.arange(12), BUCKETS, 4, drop_longer=True)
    assert sorted(i for b in batches for i in b.index.tolist()) == list(range(10))
    with pytest.warns(RuntimeWarning), pytest.raises(lk.InputError, match="no sequences left"):
        lk.bucket_batches([np.ones(45)], [0], BUCKETS, 4, drop_longer=True)


@pytest.mark.parametrize("call, match", [
    (lambda: lk.bucket_batches([], [], BUCKETS, 4), "no sequences"),
    (lambda: lk.bucket_batches(torch.ones(3, 4), [0, 1, 2], BUCKETS, 4), "list of 1-D"),
    (lambda: lk.bucket_batches([[1, 2], []], [0, 1], BUCKETS, 4), "sequence 1 is empty"),
    (lambda: lk.bucket_batches([[1, 2], [3]], [0], BUCKETS, 4), "1 rows for 2 sequences"),
    (lambda: lk.bucket_batches([[1, 2]], [0], [], 4), "non-empty list"),
    (lambda: lk.bucket_batches([[1, 2]], [0], [10, 10], 4), "distinct"),
    (lambda: lk.bucket_batches([[1, 2]], [0], [0, 5], 4), "positive ints"),
    (lambda: lk.bucket_batches([[1, 2]], [0], BUCKETS, 0), "batch_size"),
    (lambda: lk.bucket_batches([[1, 2], ["a"]], [0, 1], BUCKETS, 4), "sequence 1 is not"),
    (lambda: lk.bucket_batches([np.ones((2, 3)), np.ones((2, 4))], [0, 1], BUCKETS, 4),
     "sequence 1 has steps of shape"),
])
def test_bad_input_is_a_clear_input_error(call, match):
    with pytest.raises(lk.InputError, match=match):
        call()
