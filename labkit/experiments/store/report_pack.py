"""A trial's reports packed in one blob: each metric's name said once, numbers as machine words.

The store keeps a trial's reports in a few rows of packed reports (one once
the trial ended) instead of a row of JSON a report.  :func:`pack` writes
``[(step, metrics, time), ...]`` (and the attempt each came from) as a short
JSON header naming the metrics and how each column is held, then the columns:
steps, times and the metrics' values, each as little-endian machine numbers
(integers in the fewest bytes that hold them, floats as doubles) where every
value of the column is one kind, else as JSON in the header.  :func:`unpack`
reads them back equal (numbers as JSON would give them: a numpy scalar as
its number), a hundred thousand reports in a few milliseconds of C.

Examples
--------
>>> blob = pack([(0, {"loss": 0.5}, 10.0), (1, {"loss": 0.25, "acc": 1}, 11.0)], [1, 1])
>>> unpack(blob)
[(0, {'loss': 0.5}, 10.0), (1, {'loss': 0.25, 'acc': 1}, 11.0)]
>>> unpack(blob, attempts=True)[1]
[1, 1]
"""

from __future__ import annotations

import json
import sys
from array import array
from typing import Any

__all__ = ["pack", "unpack", "FORMAT"]

#: The first byte of a packed blob (its format's version).
FORMAT = b"\x01"

#: Integer type codes of :mod:`array`, smallest first, with the range each holds.
_INTS = (("b", 1 << 7), ("h", 1 << 15), ("i", 1 << 31), ("q", 1 << 63))
_SWAP = sys.byteorder != "little"  # the blob is little-endian everywhere

#: Headers decoded lately (a header's columns held as JSON are lists: read, never changed).
_HEADERS: dict[bytes, dict] = {}
_KEEP_HEADERS = 4096
_COLUMNS = ("shape", "step", "time", "values")


def pack(reports: list, attempts: list[int], plain: Any = None) -> bytes:
    """``reports`` ``[(step, metrics, time), ...]`` and each one's attempt, as one blob.

    ``plain(value)`` gives JSON a value it cannot hold (see :func:`json.dumps`'s ``default``).
    """
    shapes: dict[tuple, int] = {}
    shape_of, steps, times, values = [], [], [], []
    for step, metrics, t in reports:
        keys = tuple(metrics)
        shape_of.append(shapes.setdefault(keys, len(shapes)))
        steps.append(step)
        times.append(t)
        values.extend(metrics.values())
    header: dict[str, Any] = {"n": len(reports), "keys": [list(k) for k in shapes]}
    body: list[bytes] = []
    if len(shapes) > 1:
        header["shape"] = _column(shape_of, body)
    header["step"] = _column(steps, body)
    header["time"] = _column(times, body)
    header["values"] = _column(values, body)
    header["nv"] = len(values)
    header["att"] = _runs(attempts)
    head = json.dumps(header, separators=(",", ":"), default=plain).encode()
    return b"".join([FORMAT, len(head).to_bytes(4, "little"), head, *body])


def unpack(blob: bytes, attempts: bool = False) -> Any:
    """The reports of a blob of :func:`pack` (``attempts``: and each one's attempt, as a pair)."""
    if blob[:1] != FORMAT:
        raise ValueError(f"not a packed report blob of format {FORMAT!r}: {bytes(blob[:1])!r}")
    size = int.from_bytes(blob[1:5], "little")
    head = bytes(blob[5 : 5 + size])
    header = _HEADERS.get(head)
    if header is None:
        header = json.loads(head)
        if all(isinstance(header.get(c, ""), str) for c in _COLUMNS):
            # trials that reported alike have one header, decoded once (one holding
            # values as JSON is not kept: its values would be shared between reads)
            if len(_HEADERS) >= _KEEP_HEADERS:
                _HEADERS.clear()
            _HEADERS[head] = header
    at, n = 5 + size, header["n"]
    shape_of = None
    if "shape" in header:
        shape_of, at = _read(header["shape"], n, blob, at)
    steps, at = _read(header["step"], n, blob, at)
    times, at = _read(header["time"], n, blob, at)
    values, at = _read(header["values"], header["nv"], blob, at)
    reports = _rows(header["keys"], shape_of, steps, values, times)
    if not attempts:
        return reports
    return reports, [a for a, count in header["att"] for _ in range(count)]


def _rows(keys: list, shape_of: list | None, steps: list, values: list, times: list) -> list:
    """``[(step, metrics, time), ...]`` from the columns."""
    if shape_of is None:  # one set of metrics in every report (the common case: fast paths)
        names = keys[0]
        width = len(names)
        if width == 1:
            name = names[0]
            return [(s, {name: v}, t) for s, v, t in zip(steps, values, times, strict=True)]
        return [
            (s, dict(zip(names, values[i * width : (i + 1) * width], strict=True)), t)
            for i, (s, t) in enumerate(zip(steps, times, strict=True))
        ]
    rows, at = [], 0
    for s, shape, t in zip(steps, shape_of, times, strict=True):
        names = keys[shape]
        rows.append((s, dict(zip(names, values[at : at + len(names)], strict=True)), t))
        at += len(names)
    return rows


def _column(values: list, body: list[bytes]) -> Any:
    """How ``values`` are held: an array type code (its bytes appended to ``body``), or the list."""
    kind = _kind(values)
    if kind is None:
        return values  # JSON in the header: strings, None, mixed kinds, big integers
    numbers = array(kind, values)
    if _SWAP:
        numbers.byteswap()
    body.append(numbers.tobytes())
    return kind


def _kind(values: list) -> str | None:
    """The array type code that holds every one of ``values`` exactly, or None."""
    if not values:
        return "b"
    if all(isinstance(v, float) for v in values):  # numpy's float64 too: read back a float
        return "d"
    if all(type(v) is int for v in values):  # not bool: JSON keeps true as true
        low, high = min(values), max(values)
        for code, bound in _INTS:
            if -bound <= low and high < bound:
                return code
    return None


def _read(kind: Any, count: int, blob: bytes, at: int) -> tuple[list, int]:
    """``count`` values held as ``kind`` at ``at`` in ``blob``; and where the next column starts."""
    if not isinstance(kind, str):
        return kind, at
    numbers = array(kind)
    end = at + numbers.itemsize * count
    numbers.frombytes(blob[at:end])
    if _SWAP:
        numbers.byteswap()
    return numbers.tolist(), end


def _runs(attempts: list[int]) -> list[list[int]]:
    """``attempts`` as ``[[attempt, how many in a row], ...]``."""
    runs: list[list[int]] = []
    for a in attempts:
        if runs and runs[-1][0] == a:
            runs[-1][1] += 1
        else:
            runs.append([a, 1])
    return runs
