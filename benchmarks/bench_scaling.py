"""How cost grows: PCA time against the number of chunks and against chunk size.

Run ``python benchmarks/bench_scaling.py`` (about two minutes on 2 cores) or
``--quick``.  Chunks are generated on the workers (a Dask array), so what is
measured is labkit's scheduling on top of the work, beside the same work done
serially in this process (BLAS on 1 thread), on the default ``DaskScheduler()``:

A. chunks of a fixed size (5000 x 200), 10 -> 160 of them: time should grow
   linearly with the data; the fixed cost of a phase shows at the small end.
B. a fixed amount of data (800,000 rows of 200 columns; less with --quick) cut
   into chunks of 500 -> 100,000 rows: per-task overhead shows at the small
   end, too few tasks for two threads (and the last task's tail) at the big end.

Prints seconds, the speed-up and labkit's time per chunk; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_core import make_chunk  # noqa: E402

import labkit as lk  # noqa: E402

SIZES = {
    "full": dict(rows=5000, dim=200, counts=[10, 20, 40, 80, 160], total=800_000,
                 chunk_rows=[500, 2000, 8000, 32000, 100_000], reps=3),
    "quick": dict(rows=500, dim=20, counts=[4, 8], total=4000, chunk_rows=[500, 2000],
                  reps=1),
}


def dask_array(n_chunks, rows, dim):
    """``n_chunks`` blocks of ``rows x dim`` generated on the workers."""
    import dask
    import dask.array as da
    import numpy as np
    return da.concatenate([da.from_delayed(dask.delayed(make_chunk, pure=False)(i, rows, dim),
                                           shape=(rows, dim), dtype=np.float64)
                           for i in range(n_chunks)], axis=0)


def serial(n_chunks, rows, dim) -> float:
    from threadpoolctl import threadpool_limits
    with threadpool_limits(limits=1):
        t0 = time.perf_counter()
        lk.Flow([lk.nodes.PCA(output_dim=10)]).train(
            [(make_chunk(i, rows, dim) for i in range(n_chunks))])
        return time.perf_counter() - t0


def parallel(s, n_chunks, rows, dim) -> float:
    source = dask_array(n_chunks, rows, dim)
    t0 = time.perf_counter()
    lk.ParallelFlow([lk.nodes.PCA(output_dim=10)]).train([source], scheduler=s)
    return time.perf_counter() - t0


def measure(s, n_chunks, rows, dim, reps) -> tuple[float, float]:
    """Median serial and labkit seconds, alternating."""
    ser, par = [], []
    for r in range(reps):
        if r % 2:
            par.append(parallel(s, n_chunks, rows, dim))
            ser.append(serial(n_chunks, rows, dim))
        else:
            ser.append(serial(n_chunks, rows, dim))
            par.append(parallel(s, n_chunks, rows, dim))
    return statistics.median(ser), statistics.median(par)


def row(label, n_chunks, t_serial, t_par) -> None:
    print(f"  {label:<28} chunks {n_chunks:5d}  serial {t_serial:7.3f} s  labkit {t_par:7.3f} s  "
          f"=> {t_serial / t_par:5.2f}x   labkit {1e3 * t_par / n_chunks:7.2f} ms/chunk",
          flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    cfg = SIZES["quick" if args.quick else "full"]
    print(f"labkit scaling ({'quick' if args.quick else 'full'}): {' '.join(sys.argv)}")
    print(time.strftime("%Y-%m-%d %H:%M:%S %Z"), f"{os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.2f}; medians of {cfg['reps']}")
    with lk.DaskScheduler() as s:
        parallel(s, 4, cfg["rows"], cfg["dim"])                        # warm-up
        print(f"A. chunks of {cfg['rows']} x {cfg['dim']}, more of them")
        for n in cfg["counts"]:
            row(f"{n * cfg['rows']} rows", n, *measure(s, n, cfg["rows"], cfg["dim"], cfg["reps"]))
        print(f"B. {cfg['total']} x {cfg['dim']} rows in all, cut into chunks of")
        for rows in cfg["chunk_rows"]:
            n = max(1, cfg["total"] // rows)
            row(f"{rows} rows", n, *measure(s, n, rows, cfg["dim"], cfg["reps"]))


if __name__ == "__main__":
    main()
