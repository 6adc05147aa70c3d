"""The board's Pareto frames at 10,000 trials (issue 48): bytes and kernel CPU a frame.

A ZDT1-like problem with noise (two objectives, minimised; a front of a few hundred trials at
the end): 10,000 trials end, ``--per-frame`` of them between two frames (a board's frame at
4 a second). Each frame folds the changed rows into the front (:class:`ParetoFrames`) and
writes the ``pareto`` part of a delta; its bytes are counted as a kernel serialises a comm
message (jupyter_client's json packer) and its CPU time on the thread that folds.

    .venv/bin/python benchmarks/bench_pareto_view.py [--per-frame 50] [--objectives 2]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time

import numpy as np
from jupyter_client.session import json_packer

from labkit.experiments import TrialRecord
from labkit.views.sweep.pareto import ParetoFrames

N = 10_000


def records(k: int, seed: int = 5) -> list[TrialRecord]:
    """N ended trials of ``k`` objectives (the first uniform, the others a noisy ZDT1 curve)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 1, N)
    cols = [x] + [1 - np.sqrt(x) * (j + 1) / k + rng.exponential(0.3, N) for j in range(k - 1)]
    names = [f"f{j}" for j in range(k)]
    return [
        TrialRecord(id=i, config={}, status="completed", value=float(x[i]), best=float(x[i]),
                    step=1, attempts=1, objectives={n: float(c[i]) for n, c in zip(names, cols)})
        for i in range(N)
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--per-frame", type=int, default=50)
    parser.add_argument("--objectives", type=int, default=2)
    parser.add_argument("--no-gc", action="store_true", help="the collector off while timed")
    parser.add_argument("--quick", action="store_true", help="a smoke test: 1,000 trials")
    args = parser.parse_args()
    k = args.objectives
    rows = records(k)[: 1000 if args.quick else N]
    frames = ParetoFrames([f"f{j}" for j in range(k)], ["min"] * k)
    sizes, cpus = [], []
    for start in range(0, len(rows), args.per_frame):
        if args.no_gc:
            gc.disable()
        cpu = time.thread_time()
        frames.fold(rows[start:start + args.per_frame])
        part = frames.delta()
        cpus.append(time.thread_time() - cpu)
        gc.enable()
        sizes.append(len(json_packer({"kind": "delta", "pareto": part})))
    paint = len(json_packer(frames.paint()))
    print(f"objectives {k}, {args.per_frame} trials a frame, {len(sizes)} frames, "
          f"collector {'off' if args.no_gc else 'on'} while timed, "
          f"front {len(frames.front)}")
    print(f"pareto part of a delta: median {statistics.median(sizes)} B, max {max(sizes)} B")
    print(f"fold + delta CPU: median {1e3 * statistics.median(cpus):.2f} ms, "
          f"max {1e3 * max(cpus):.2f} ms")
    print(f"pareto part of a paint at {len(rows)} trials: {paint} B")


if __name__ == "__main__":
    main()
