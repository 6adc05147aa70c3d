"""What a chunk costs to reach a worker: bytes through the loopback socket, and time.

Run ``python benchmarks/bench_copies.py`` (full size, about two minutes on 2
cores) or ``--quick``.  PCA on chunks from a client iterator (bench_core's
40 chunks of 20000 x 200 float64), alternating, medians:

* serial ``Flow`` (BLAS 1 thread), the baseline;
* worker processes (2 x 1, embedded), chunks pickled through the socket
  (``shared_memory=False``, as before);
* the same workers, chunks through shared memory (the default there);
* the default in-process cluster (chunks by reference).

For each it prints the bytes the loopback interface carried per chunk during
the training (Linux counts each byte once), and the speed-up.  Asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_core import alternate, client_chunks  # noqa: E402

import labkit as lk  # noqa: E402

SIZES = {
    "full": dict(n_chunks=40, rows=20_000, dim=200, reps=3),
    "quick": dict(n_chunks=4, rows=2_000, dim=50, reps=1),
}
VARIANTS = {
    "processes 2x1, pickled through the socket": dict(mode="processes", n_workers=2,
                                                      shared_memory=False),
    "processes 2x1, shared memory": dict(mode="processes", n_workers=2),
    "auto (in-process, by reference)": dict(mode="auto"),
}


def loopback_bytes() -> int:
    import psutil
    counters = psutil.net_io_counters(pernic=True)
    return counters["lo"].bytes_sent if "lo" in counters else 0


def serial(cfg):
    from threadpoolctl import threadpool_limits
    with threadpool_limits(limits=1):
        t0 = time.perf_counter()
        lk.Flow([lk.nodes.PCA(output_dim=20)]).train([client_chunks(cfg)])
        return time.perf_counter() - t0


def parallel(cfg, s):
    """Seconds, and loopback bytes per chunk."""
    before = loopback_bytes()
    t0 = time.perf_counter()
    lk.ParallelFlow([lk.nodes.PCA(output_dim=20)]).train([client_chunks(cfg)], scheduler=s)
    seconds = time.perf_counter() - t0
    return seconds, (loopback_bytes() - before) / cfg["n_chunks"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    cfg = SIZES["quick" if args.quick else "full"]
    chunk_bytes = cfg["rows"] * cfg["dim"] * 8
    print(f"labkit chunk copies ({'quick' if args.quick else 'full'}): {' '.join(sys.argv)}")
    print(time.strftime("%Y-%m-%d %H:%M:%S %Z"), f"{os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"PCA, {cfg['n_chunks']} chunks of {cfg['rows']}x{cfg['dim']} float64 "
          f"({chunk_bytes / 2**20:.1f} MiB each) from a client iterator")
    schedulers = {name: lk.DaskScheduler(**options) for name, options in VARIANTS.items()}
    try:
        for s in schedulers.values():
            parallel(dict(cfg, n_chunks=2), s)   # warm-up
        runs = {"serial Flow, BLAS 1 thread": lambda: serial(cfg)}
        runs.update({name: (lambda s=s: parallel(cfg, s)) for name, s in schedulers.items()})
        res = alternate(runs, cfg["reps"])
    finally:
        for s in schedulers.values():
            s.shutdown()
    base = res["serial Flow, BLAS 1 thread"][0]
    for name, (median, times, per_chunk) in res.items():
        sent = "" if per_chunk is None else (f"  loopback {per_chunk / 2**20:7.2f} MiB a chunk "
                                             f"({per_chunk / chunk_bytes:.2f}x the chunk)")
        print(f"  {name:<44} median {median:6.3f} s  => {base / median:.2f}x serial{sent}",
              flush=True)
    socket, shared = (res[n][0] for n in list(VARIANTS)[:2])
    print(f"  => worker processes: socket time / shared-memory time {socket / shared:.2f}")


if __name__ == "__main__":
    main()
