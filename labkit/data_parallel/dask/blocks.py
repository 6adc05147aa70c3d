"""Dask arrays on the workers: which rank reads which row block, moving as few as needed.

The blocks of ``X`` and ``y`` are persisted on the cluster (they stay where
they are if they already were), and each block goes to the rank whose worker
holds it.  Rows are moved only where the blocks are too uneven for the
ranks' shares: while a rank holds more than its share by more than
:data:`TOLERANCE` (and at least a block) and another less, the block that
best evens them moves (Dask fetches it when the rank's task starts).  After a
worker is lost its blocks go to the ranks left the same way (Dask recomputes
them from their graph).

Examples
--------
>>> assign([(0, 40), (40, 80), (80, 100)], [0, 0, 1], [0.5, 0.5])
[0, 1, 1]
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import InputError, SchedulerError

__all__ = ["WorkerBlocks", "assign", "TOLERANCE"]

#: How far a rank's rows may stray from its share (a fraction of all rows) before blocks move.
TOLERANCE = 0.05


def assign(spans: list, holders: list, shares: list) -> list:
    """A rank for each block ``spans[i] = (start, stop)``: its holder's, evened out by shares.

    ``holders[i]`` is the rank whose worker holds block ``i`` (``None``: none does).
    """
    total = sum(stop - start for start, stop in spans)
    target = [s * total for s in shares]
    ranks = list(holders)
    load = [0] * len(shares)
    for i, rank in enumerate(ranks):
        if rank is None:  # held by no rank's worker: the rank with the most room takes it
            rank = ranks[i] = max(range(len(shares)), key=lambda r: target[r] - load[r])
        load[rank] += spans[i][1] - spans[i][0]
    while True:
        over = max(range(len(shares)), key=lambda r: load[r] - target[r])
        under = min(range(len(shares)), key=lambda r: load[r] - target[r])
        gap = min(load[over] - target[over], target[under] - load[under])
        if gap <= TOLERANCE * total:
            return ranks
        # the block of ``over`` whose size is closest to what evens the two out
        mine = [i for i, r in enumerate(ranks) if r == over]
        best = min(reversed(mine), key=lambda i: abs((spans[i][1] - spans[i][0]) - gap))
        size = spans[best][1] - spans[best][0]
        if size >= 2 * gap:  # moving it would leave them as uneven the other way
            return ranks
        ranks[best] = under
        load[over] -= size
        load[under] += size


@dataclass
class WorkerBlocks:
    """The persisted blocks of ``(X, y)``: their row spans and futures, and who holds them."""

    spans: list  # (start, stop) per block, in row order
    x: list  # a future per block of X
    y: list  # a future per block of y

    @classmethod
    def of(cls, client, x, y) -> WorkerBlocks:
        """Persist ``x`` and ``y`` (rows aligned, whole rows a block) and take their blocks."""
        if x.ndim > 1 and len(x.chunks[1]) > 1:
            x = x.rechunk({i: -1 for i in range(1, x.ndim)})  # a replica needs whole rows
        if y.chunks[0] != x.chunks[0]:
            y = y.rechunk({0: x.chunks[0]})
        if y.ndim > 1 and len(y.chunks[1]) > 1:
            y = y.rechunk({i: -1 for i in range(1, y.ndim)})
        if not x.chunks[0] or sum(x.chunks[0]) == 0:
            raise InputError("X has no rows", argument="X")
        try:
            x, y = client.persist([x, y])
        except Exception as exc:
            raise SchedulerError(
                f"could not place X and y on the workers: {type(exc).__name__}: {exc}"
            ) from exc
        futures = {f.key: f for f in client.futures_of([x, y])}
        x_keys = _row_keys(x)
        y_keys = _row_keys(y)
        starts = [0]
        for n in x.chunks[0]:
            starts.append(starts[-1] + n)
        spans = [(starts[i], starts[i + 1]) for i in range(len(x.chunks[0]))]
        if not spans or starts[-1] == 0:
            raise InputError("X has no rows", argument="X")
        return cls(spans, [futures[k] for k in x_keys], [futures[k] for k in y_keys])

    def holders(self, client, names: list) -> list:
        """The rank whose worker holds each block of X (``None`` for none of them)."""
        who = client.who_has(self.x)
        rank_of = {name: r for r, name in enumerate(names)}
        out = []
        for future in self.x:
            ranks = [rank_of[w] for w in who.get(future.key, ()) if w in rank_of]
            out.append(min(ranks) if ranks else None)
        return out

    def table(self, ranks: list) -> list:
        """``(start, stop, rank)`` of every block."""
        return [(a, b, r) for (a, b), r in zip(self.spans, ranks, strict=True)]

    def of_rank(self, ranks: list, rank: int) -> tuple:
        """``(block numbers, X futures, y futures)`` of ``rank``."""
        mine = [i for i, r in enumerate(ranks) if r == rank]
        return mine, [self.x[i] for i in mine], [self.y[i] for i in mine]

    def keys_of(self, blocks: list) -> list:
        """The Dask keys of blocks ``blocks`` of X and y: what a worker keys its rows by.

        Block numbers alone would name other arrays' rows alike (a second fit on
        arrays chunked as the first), so a worker would train on the first fit's rows.
        """
        return [str(self.x[i].key) for i in blocks] + [str(self.y[i].key) for i in blocks]

    def release(self) -> None:
        """Let go of the persisted blocks this fit made."""
        for future in self.x + self.y:
            future.release()
        self.x, self.y = [], []


def _row_keys(array) -> list:
    """The keys of an array's row blocks, in row order (one column block a row block)."""
    keys = array.__dask_keys__()
    out = []
    for block in keys:
        while isinstance(block, list):
            block = block[0]
        out.append(block)
    return out
