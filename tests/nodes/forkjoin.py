"""Fork/join training helpers shared by the node tests."""

import numpy as np


def uneven_chunks(x, n_chunks=7, seed=1):
    """``x`` split at random, uneven places (no chunk shorter than 2 rows at the ends)."""
    cuts = np.sort(np.random.default_rng(seed).choice(np.arange(2, len(x) - 2),
                                                     n_chunks - 1, replace=False))
    return np.split(x, cuts)


def train_forked(node, chunks, seed=2):
    """One phase: a fork per chunk, joined in shuffled order, then stop_training."""
    forks = []
    for chunk in chunks:
        fork = node.fork()
        fork.train(*(chunk if isinstance(chunk, tuple) else (chunk,)))
        forks.append(fork)
    for i in np.random.default_rng(seed).permutation(len(forks)):
        node.join(forks[i])
    node.stop_training()
    return node


def fit(node, data, chunked, seed=0, bounds=None):
    """Train ``node`` through all phases on the arrays ``data``.

    With ``chunked``, each phase forks once per chunk (split at ``bounds``)
    and joins the forks in shuffled order; otherwise it trains on all rows.
    """
    rng = np.random.default_rng(seed)
    while node.is_training():
        if chunked:
            parts = list(zip(*(np.split(a, bounds) for a in data)))
            train_forked(node, parts, seed=int(rng.integers(1 << 30)))
        else:
            node.train(*data)
            node.stop_training()
    return node
