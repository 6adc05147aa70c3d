"""Pipelines: ``lk.pipe`` beside a hand-written thread pipeline, and thread scaling.

Run ``python benchmarks/bench_pipeline.py`` (full size, about a minute) or
``--quick`` (a smoke test).  It prints timings and ratios; it never asserts on
timings.

1. **Trivial processor.**  ``pipe(source, processor=inc)`` read to the end by
   the caller, against the plain pipeline one would write by hand with the
   standard library: a thread reading the source into a ``queue.Queue(100)``,
   a thread applying ``inc`` into a second ``queue.Queue(100)``, the caller
   draining it until a sentinel.  Both move the same records the same way
   (one reader, one processor thread, bounded queues); the ratio is labkit
   records/s over hand-written records/s, target at least 1.0.
2. **A processor that releases the GIL.**  ``pipe`` over blocks of float64,
   each multiplied by a fixed matrix with BLAS held to one thread, on 2
   threads against 1; target at least 1.7x.

Variants alternate their order on each repetition; medians are compared.
"""

from __future__ import annotations

import argparse
import platform
import queue
import statistics
import sys
import threading
import time

import numpy as np

import labkit as lk

SIZES = {"full": dict(records=200_000, blocks=400, block=(400, 400), reps=5),
         "quick": dict(records=20_000, blocks=40, block=(200, 200), reps=1)}
TARGET_TRIVIAL = 1.0
TARGET_THREADS = 1.7
_END = object()


def inc(x):
    """The trivial processor."""
    return x + 1


def by_hand(n: int) -> int:
    """The plain two-queue pipeline: reader thread, processor thread, caller drains."""
    q_in, q_out = queue.Queue(100), queue.Queue(100)

    def read():
        for record in range(n):
            q_in.put(record)
        q_in.put(_END)

    def process():
        while (record := q_in.get()) is not _END:
            q_out.put(inc(record))
        q_out.put(_END)

    threads = [threading.Thread(target=read), threading.Thread(target=process)]
    for t in threads:
        t.start()
    count = 0
    while q_out.get() is not _END:
        count += 1
    for t in threads:
        t.join()
    return count


def with_labkit(n: int) -> int:
    """The same with ``lk.pipe``: the stage reads the source itself."""
    count = 0
    for _ in lk.pipe(range(n), processor=inc, capacity=100):
        count += 1
    return count


def timed(fn, *args) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def bench_trivial(size: dict) -> None:
    n = size["records"]
    times = {"hand": [], "labkit": []}
    for rep in range(size["reps"] + 1):
        order = ["hand", "labkit"] if rep % 2 else ["labkit", "hand"]
        for name in order:
            t = timed(by_hand if name == "hand" else with_labkit, n)
            if rep:  # the first repetition warms up
                times[name].append(t)
    hand, lab = (statistics.median(times[k]) for k in ("hand", "labkit"))
    print(f"1. trivial processor, {n} records")
    print(f"   hand-written two-queue pipeline : {n / hand:10,.0f} records/s ({hand:.3f} s)")
    print(f"   lk.pipe                         : {n / lab:10,.0f} records/s ({lab:.3f} s)")
    print(f"   labkit / hand-written (records/s): {hand / lab:.2f}  (target >= {TARGET_TRIVIAL})")


def bench_threads(size: dict) -> None:
    from threadpoolctl import threadpool_limits
    rng = np.random.default_rng(0)
    blocks = [rng.normal(size=size["block"]) for _ in range(size["blocks"])]
    matrix = rng.normal(size=(size["block"][1], size["block"][1]))

    def project(block):
        return block @ matrix

    def run(threads: int) -> float:
        start = time.perf_counter()
        n = sum(1 for _ in lk.pipe(blocks, processor=project, num_threads=threads))
        assert n == len(blocks)
        return time.perf_counter() - start

    times = {1: [], 2: []}
    with threadpool_limits(1):  # the threads of the pipe are the only parallelism
        for rep in range(size["reps"] + 1):
            for threads in ([1, 2] if rep % 2 else [2, 1]):
                t = run(threads)
                if rep:
                    times[threads].append(t)
    one, two = statistics.median(times[1]), statistics.median(times[2])
    print(f"2. GIL-releasing processor (block @ matrix, BLAS 1 thread), {len(blocks)} blocks "
          f"of {size['block'][0]}x{size['block'][1]}")
    print(f"   1 thread : {len(blocks) / one:8.1f} blocks/s ({one:.3f} s)")
    print(f"   2 threads: {len(blocks) / two:8.1f} blocks/s ({two:.3f} s)")
    print(f"   2 threads / 1 thread: {one / two:.2f}x  (target >= {TARGET_THREADS})")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a smoke test")
    args = parser.parse_args(argv)
    size = SIZES["quick" if args.quick else "full"]
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}, {platform.machine()}, "
          f"labkit {lk.__version__}")
    bench_trivial(size)
    bench_threads(size)


if __name__ == "__main__":
    main()
