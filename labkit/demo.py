"""The demo: a PCA → quadratic expansion → Gaussian classifier flow on digits.

Trains in parallel on an embedded Dask ``LocalCluster`` with console
progress, trains the same flow serially for comparison, and reports what it
learnt (test accuracy, agreement with serial training) and the timings.
Uses scikit-learn's bundled digits data (no download).
"""

from __future__ import annotations

import sys
import time
from collections import Counter

import numpy as np

__all__ = ["run_demo", "load_chunks"]


def load_chunks(chunk_size: int = 150, seed: int = 0):
    """Digits as training chunks ``(x, labels)`` and a held-out test set."""
    from sklearn.datasets import load_digits
    digits = load_digits()
    order = np.random.default_rng(seed).permutation(len(digits.target))
    x, y = digits.data[order].astype(np.float64), digits.target[order]
    n_train = int(0.78 * len(y))
    train = [(x[i:i + chunk_size], y[i:i + chunk_size]) for i in range(0, n_train, chunk_size)]
    return train, (x[n_train:], y[n_train:])


def _nodes():
    import labkit as lk
    return [lk.nodes.PCA(output_dim=20), lk.nodes.QuadraticExpansion(),
            lk.nodes.GaussianClassifier()]


def run_demo(n_workers: int = 2, chunk_size: int = 150, stream=None, serve=None) -> dict:
    """Run the demo; print a report to ``stream`` and return its figures.

    With ``serve``, a callable, the Bokeh dashboard of the demo's scheduler is
    started before training (so it shows the whole run), its URL is printed as
    ``labkit dashboard: URL``, and once the report is printed
    ``serve(scheduler, url)`` is called; the cluster and the dashboard stay up
    until it returns.
    """
    import labkit as lk
    from labkit.events import TaskFinished
    from labkit.views import ConsoleProgress
    out = stream or sys.stdout
    train, (x_test, y_test) = load_chunks(chunk_size)
    data = [[x for x, _ in train], None, train]
    print(f"labkit demo: digits, {sum(len(x) for x, _ in train)} training samples in "
          f"{len(train)} chunks, flow PCA(20) -> QuadraticExpansion -> GaussianClassifier",
          file=out)
    started = time.perf_counter()
    with lk.DaskScheduler(n_workers=n_workers) as s:
        print(f"Dask cluster: {n_workers} worker processes on 127.0.0.1 "
              f"(started in {time.perf_counter() - started:.1f} s), "
              f"Dask dashboard {s.dashboard_link}", file=out)
        url = None
        if serve is not None:
            url = lk.dashboard(s)
            print(f"labkit dashboard: {url}", file=out, flush=True)
        workers = Counter()
        s.subscribe(lambda e: workers.update([e.worker]) if isinstance(e, TaskFinished) else None)
        progress = ConsoleProgress(s, stream=out)
        flow = lk.ParallelFlow(_nodes())
        t0 = time.perf_counter()
        flow.train(data, scheduler=s)
        parallel_s = time.perf_counter() - t0
        features = flow[:-1].execute(np.array_split(x_test, 4), scheduler=s)
        progress.close()
        if serve is None:
            s.shutdown()  # the serial comparison below needs no cluster
        figures = _compare(flow, features, workers, parallel_s, data, x_test, y_test)
        _report(figures, len(y_test), out)
        if serve is not None:
            serve(s, url)
    return figures


def _compare(flow, features, workers, parallel_s, data, x_test, y_test) -> dict:
    """Train the same flow serially; the demo's figures."""
    import labkit as lk
    predicted = flow[-1].label(features)
    t0 = time.perf_counter()
    serial = lk.Flow(_nodes())
    serial.train(data)
    serial_s = time.perf_counter() - t0
    return {
        "accuracy": float(np.mean(predicted == y_test)),
        "agreement": float(np.mean(predicted == serial[-1].label(serial[:-1].execute(x_test)))),
        "parallel_s": parallel_s, "serial_s": serial_s, "tasks_per_worker": dict(workers),
        "pca_explained_variance": float(flow[0].explained_variance),
    }


def _report(f: dict, n_test: int, out) -> None:
    print(f"\nwhat it learnt:\n  PCA keeps {100 * f['pca_explained_variance']:.1f}% of the "
          f"variance in 20 components\n  test accuracy {100 * f['accuracy']:.1f}% on {n_test} "
          f"held-out digits\n  parallel and serial training agree on "
          f"{100 * f['agreement']:.1f}% of the test labels", file=out)
    per_worker = ", ".join(f"{w.replace('tcp://', '')}: {n}"
                           for w, n in sorted(f["tasks_per_worker"].items()))
    print(f"timings:\n  parallel training {f['parallel_s']:.2f} s (tasks per worker "
          f"{per_worker})\n  serial training   {f['serial_s']:.2f} s\n  (digits is small: "
          "cluster overhead dominates; see benchmarks/ for large data)", file=out)
