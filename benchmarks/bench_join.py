"""Joining on the workers against joining on the client, for a node with a big state.

Run ``python benchmarks/bench_join.py`` (full size, about two minutes on 2
cores) or ``--quick``.  The case the issue names: a ``QuadraticExpansion`` of
50 inputs into ``SFA`` (1325 expanded columns: each fork holds two 1325 x 1325
covariance sums, 27 MiB), trained from a client iterator.  For worker
processes and for the default in-process cluster it times, alternating, with
medians: a serial ``Flow`` (BLAS 1 thread), ``join="client"`` (one fork a
chunk comes back) and ``join="workers"`` (one fork per worker thread).  It
counts the forks the client joined and the bytes they are when pickled.
Prints ratios; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_core import alternate  # noqa: E402

import labkit as lk  # noqa: E402

SIZES = {
    "full": dict(n_chunks=16, rows=2000, inputs=50, reps=3),
    "quick": dict(n_chunks=4, rows=300, inputs=8, reps=1),
}
CONFIGS = {
    "processes 2x1": dict(mode="processes", n_workers=2, threads_per_worker=1),
    "auto (the default, in-process)": dict(mode="auto"),
}

def chunks(cfg):
    """A slowly drifting signal, in order (SFA needs consecutive rows)."""
    rng = np.random.default_rng(3)
    start = np.zeros(cfg["inputs"])
    for _ in range(cfg["n_chunks"]):
        x = start + np.cumsum(rng.standard_normal((cfg["rows"], cfg["inputs"])), axis=0) * 0.1
        start = x[-1]
        yield x


def flow_nodes():
    return [lk.nodes.QuadraticExpansion(), lk.nodes.SFA(output_dim=5)]


def serial(cfg):
    from threadpoolctl import threadpool_limits
    with threadpool_limits(limits=1):
        t0 = time.perf_counter()
        lk.Flow(flow_nodes()).train([None, chunks(cfg)])
        return time.perf_counter() - t0


def parallel(cfg, s, join):
    """Seconds to train, and the number of forks joined on the client."""
    flow = lk.ParallelFlow(flow_nodes())
    node, joined = flow[1], []
    join_here = node.join
    node.join = lambda forked: (joined.append(1), join_here(forked))
    t0 = time.perf_counter()
    flow.train([None, chunks(cfg)], scheduler=s, join=join)
    return time.perf_counter() - t0, len(joined)


def fork_bytes(cfg) -> int:
    """Pickled size of one fork after one chunk."""
    node = flow_nodes()
    fork = node[1].fork()
    fork.train(node[0].execute(next(chunks(cfg))))
    return len(pickle.dumps(fork, protocol=5))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    cfg = SIZES["quick" if args.quick else "full"]
    print(f"labkit join benchmark ({'quick' if args.quick else 'full'}): {' '.join(sys.argv)}")
    print(time.strftime("%Y-%m-%d %H:%M:%S %Z"), f"{os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.2f}")
    size = fork_bytes(cfg)
    print(f"QuadraticExpansion({cfg['inputs']} inputs) -> SFA, {cfg['n_chunks']} chunks of "
          f"{cfg['rows']} rows from a client iterator; one fork pickled: {size / 2**20:.1f} MiB")
    for name, options in CONFIGS.items():
        with lk.DaskScheduler(**options) as s:
            parallel(dict(cfg, n_chunks=2), s, "workers")   # warm-up
            res = alternate({"serial": lambda: serial(cfg),
                             "join on the client": lambda: parallel(cfg, s, "client"),
                             "join on the workers": lambda: parallel(cfg, s, "workers")},
                            cfg["reps"])
        base = res["serial"][0]
        for variant, (median, runs, forks) in res.items():
            extra = "" if forks is None else (f"  forks joined {forks:3d} "
                                              f"({forks * size / 2**20:7.1f} MiB of forks)")
            print(f"  {name:<32} {variant:<22} median {median:6.3f} s  "
                  f"(runs: {', '.join(f'{r:.3f}' for r in runs)})  => {base / median:.2f}x "
                  f"serial{extra}", flush=True)
        ratio = res["join on the client"][0] / res["join on the workers"][0]
        print(f"  => {name}: client-join time / worker-join time {ratio:.2f}")


if __name__ == "__main__":
    main()
