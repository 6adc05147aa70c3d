"""The CPU an idle cluster takes: Dask's watchers at their defaults against the test suite's.

Run ``python benchmarks/bench_idle_cluster.py`` (about two minutes; ``--seconds``
sets each look's length).  It never asserts on timings.

A ``LocalCluster`` of two single-threaded worker processes that has run one task
sits idle for ``--seconds``; the CPU of this process (client, scheduler, nannies)
and of the workers is read before and after, for each set of Dask settings:

- ``defaults``: Dask's own (profiler every 10 ms, tick every 20 ms, system
  monitor every 0.5 s, memory watch every 0.1 s);
- ``suite``: what ``tests/conftest.py`` sets for the whole test suite (the
  profiler off, tick 1 s, system monitor 2 s, memory watch 0.5 s);
- each of the four alone, off or slowed, beside the defaults, and the first
  three together (the suite's settings before the memory watch was slowed).

The suite keeps clusters alive for a module or a session while other tests run
on the same two cores, so what an idle one takes is time the others lose
(issue 45).
"""

from __future__ import annotations

import argparse
import sys
import time

import dask
import psutil
from distributed import Client, LocalCluster

PROFILER = {"distributed.worker.profile.enabled": False}
TICK = {"distributed.admin.tick.interval": "1s"}
MONITOR = {"distributed.admin.system-monitor.interval": "2s"}
MEMORY = {"distributed.worker.memory.monitor-interval": "500ms"}

SETTINGS = {
    "defaults": {},
    "profiler off": PROFILER,
    "tick 1 s": TICK,
    "system monitor 2 s": MONITOR,
    "memory watch 0.5 s": MEMORY,
    "the first three": {**PROFILER, **TICK, **MONITOR},
    "suite (all four)": {**PROFILER, **TICK, **MONITOR, **MEMORY},
}


def cpu_of(process: psutil.Process) -> tuple[float, float]:
    """``(this process, its children)``: CPU seconds, user and system."""
    own = sum(process.cpu_times()[:2])
    children = 0.0
    for child in process.children(recursive=True):
        try:
            children += sum(child.cpu_times()[:2])
        except psutil.Error:
            continue
    return own, children


def idle_cpu(settings: dict, seconds: float) -> tuple[float, float]:
    """CPU seconds an idle two-worker cluster took over ``seconds``: (main, workers)."""
    with (
        dask.config.set(settings),
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        client.submit(sum, [1, 2]).result()
        me = psutil.Process()
        start = cpu_of(me)
        time.sleep(seconds)
        end = cpu_of(me)
    return end[0] - start[0], end[1] - start[1]


def main(argv: list[str]) -> None:
    """Print each setting's share of a core, idle."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args(argv)
    print(f"an idle LocalCluster of 2 worker processes, {args.seconds:g} s a look")
    print(f"{'settings':24s} {'main':>8s} {'workers':>8s} {'% of a core':>12s}")
    for name, settings in SETTINGS.items():
        main_s, workers_s = idle_cpu(settings, args.seconds)
        share = 100 * (main_s + workers_s) / args.seconds
        print(f"{name:24s} {main_s:8.2f} {workers_s:8.2f} {share:12.1f}")


if __name__ == "__main__":
    main(sys.argv[1:])
