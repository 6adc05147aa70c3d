"""Time and profile one 100-step fit fed from the client (small MLP), in the tree on PYTHONPATH.

Run from the repository root: ``PYTHONPATH=$PWD .venv/bin/python benchmarks/profile_fed_fit.py``.
Three fits after a warm one are timed, a fourth runs under cProfile (the client only).
Used to look into the fed-fit gap of issue 36 (benchmarks/RESULTS.md).
"""

import cProfile
import io
import pstats
import sys
import time

import torch

sys.path.insert(0, "benchmarks")
import bench_worker_loops as b  # noqa: E402

import labkit as lk  # noqa: E402


def main() -> None:
    """Time three fits, profile a fourth, print both."""
    with lk.DaskScheduler(mode="processes", n_workers=2) as s:
        model = b.mlp(256)
        X, Y = b.data(256 * 100)
        batches = [(X[i * 256 : (i + 1) * 256], Y[i * 256 : (i + 1) * 256]) for i in range(100)]
        trainer = lk.DataParallelTrainer(
            model,
            torch.nn.functional.cross_entropy,
            torch.optim.SGD(model.parameters(), lr=0.01),
            scheduler=s,
        )
        trainer.fit(batches)
        times = []
        for _ in range(3):
            t = time.perf_counter()
            trainer.fit(batches)
            times.append(time.perf_counter() - t)
        pr = cProfile.Profile()
        pr.enable()
        trainer.fit(batches)
        pr.disable()
        print("fit seconds", [round(x, 3) for x in times])
        out = io.StringIO()
        pstats.Stats(pr, stream=out).sort_stats("tottime").print_stats(18)
        print(out.getvalue()[:5000])
        trainer.close()


if __name__ == "__main__":
    main()
