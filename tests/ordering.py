"""The order in which the xdist workers take the test files: the longest first.

``make test`` hands the files to its workers one at a time (``--dist loadfile``), in
the order collected.  xdist's own order (files with the most tests first) left the
files of one or two minutes-long tests (a jobqueue cluster's sweep, a benchmark) to
the end, where one worker ran them while the other sat idle (67 s in a fresh-clone
run, issue 45).  Longest first is the classic rule for sharing work between machines
(LPT): the short files last fill the gaps.

A file's length is read from ``tests/durations.json``, the seconds its tests took in a
recorded run; a file not there (a new one) counts as the median.  To record a run,
set ``LABKIT_TEST_DURATIONS`` to a folder (the session's main process writes a line a
test phase there), then fold it into the table with ``python -m tests.ordering FOLDER``.
The table only orders the files: no test reads it, and a stale one costs time, never
a result.
"""

from __future__ import annotations

import functools
import glob
import json
import os
import statistics
import sys

import pytest

__all__ = ["TABLE", "file_seconds", "fold", "longest_first", "record_report", "start_recording"]

#: The recorded seconds of each test file (its tests' calls, set-ups and tear-downs).
TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "durations.json")


@functools.lru_cache(maxsize=1)
def file_seconds() -> dict[str, float]:
    """``{file: seconds}`` from the recorded table (empty when there is none)."""
    try:
        with open(TABLE) as f:
            return {str(k): float(v) for k, v in json.load(f).items()}
    except FileNotFoundError:
        return {}


def longest_first(items: list[pytest.Item]) -> None:
    """Reorder ``items`` in place: files by recorded length, longest first; a file's tests
    keep their order (module fixtures are set up once)."""
    seconds = file_seconds()
    usual = statistics.median(seconds.values()) if seconds else 0.0
    first_seen: dict[str, int] = {}
    for item in items:
        first_seen.setdefault(_file_of(item.nodeid), len(first_seen))

    def key(item: pytest.Item) -> tuple[float, int]:
        name = _file_of(item.nodeid)
        return -seconds.get(name, usual), first_seen[name]

    items.sort(key=key)  # stable: a file's tests stay in their order


def _file_of(nodeid: str) -> str:
    """The file part of a test id (``tests/x.py::test_y[a]`` -> ``tests/x.py``)."""
    return nodeid.split("::", 1)[0]


#: The folder this process records its tests in (empty: it records nothing).
_FOLDER: list[str] = []


def start_recording(config: pytest.Config) -> None:
    """Record the tests where ``LABKIT_TEST_DURATIONS`` asks for it, in the session's main
    process: an xdist controller hears every worker's reports, so a worker records nothing."""
    folder = os.environ.get("LABKIT_TEST_DURATIONS")
    if folder and not hasattr(config, "workerinput"):
        os.makedirs(folder, exist_ok=True)
        _FOLDER[:] = [folder]


def record_report(report: pytest.TestReport) -> None:
    """Write the seconds of a test's phase (set-up, call or tear-down), if this process
    records (start_recording)."""
    if not _FOLDER:
        return
    with open(os.path.join(_FOLDER[0], f"tests-{os.getpid()}.jsonl"), "a") as f:
        f.write(json.dumps([report.nodeid, round(report.duration, 3)]) + "\n")


def fold(folder: str) -> dict[str, float]:
    """The seconds of each file from a recorded ``folder``, written to the table."""
    seconds: dict[str, float] = {}
    for path in glob.glob(os.path.join(folder, "tests-*.jsonl")):
        with open(path) as f:
            for line in f:
                nodeid, took = json.loads(line)
                name = _file_of(nodeid)
                seconds[name] = seconds.get(name, 0.0) + took
    table = {name: round(s, 1) for name, s in sorted(seconds.items())}
    with open(TABLE, "w") as f:
        json.dump(table, f, indent=0, sort_keys=True)
        f.write("\n")
    return table


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m tests.ordering FOLDER (a run recorded with "
                 "LABKIT_TEST_DURATIONS=FOLDER)")
    folded = fold(sys.argv[1])
    print(f"{TABLE}: {len(folded)} files, {sum(folded.values()):.0f} s in all")
