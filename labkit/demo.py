"""The demo: a flow learns digits in parallel, then a workload shows the speed-up.

Part one trains PCA → quadratic expansion → Gaussian classifier on
scikit-learn's bundled digits (no download) on labkit's default embedded Dask
cluster with console progress, trains the same flow serially, and reports
what it learnt (test accuracy, agreement with serial training).  Digits is
small: there the cluster's overhead dominates.  Part two therefore times a
workload big enough for parallel to pay off, a PCA of the quadratic
expansion of 40 features (860 columns) on 24 chunks of 4000 rows streamed
from the client, serially and in parallel on the same cluster, and prints
both times and the speed-up as measured.
"""

from __future__ import annotations

import sys
import time
from collections import Counter

import numpy as np

import labkit

from .events import TaskFinished
from .flows import Flow, ParallelFlow
from .nodes import PCA, GaussianClassifier, QuadraticExpansion
from .scheduling import DaskScheduler
from .views import ConsoleProgress

__all__ = ["run_demo", "load_chunks"]


def load_chunks(chunk_size: int = 150, seed: int = 0):
    """Digits as training chunks ``(x, labels)`` and a held-out test set."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    order = np.random.default_rng(seed).permutation(len(digits.target))
    x, y = digits.data[order].astype(np.float64), digits.target[order]
    n_train = int(0.78 * len(y))
    train = [(x[i : i + chunk_size], y[i : i + chunk_size]) for i in range(0, n_train, chunk_size)]
    return train, (x[n_train:], y[n_train:])


def _nodes():
    return [
        PCA(output_dim=20),
        QuadraticExpansion(),
        GaussianClassifier(),
    ]


def speed_chunks(n_chunks: int = 24, rows: int = 4000, dim: int = 40, seed: int = 0):
    """The speed part's chunks, generated lazily on the client."""
    rng = np.random.default_rng(seed)
    for _ in range(n_chunks):
        yield rng.standard_normal((rows, dim))


def _speed_nodes():
    return [QuadraticExpansion(), PCA(output_dim=30)]


def time_speed(scheduler, repeats: int = 2) -> dict:
    """Best-of-``repeats`` seconds of the speed workload, serial (a plain ``Flow``) and parallel.

    Each variant runs as a user would run it: the serial ``Flow`` with BLAS
    left at its default threads, the parallel one on ``scheduler``.
    """
    serial, parallel = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        reference = Flow(_speed_nodes())
        reference.train([None, speed_chunks()])
        serial.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        flow = ParallelFlow(_speed_nodes())
        flow.train([None, speed_chunks()], scheduler=scheduler)
        parallel.append(time.perf_counter() - t0)
    agree = float(np.max(np.abs(flow[1].d - reference[1].d)) / np.max(np.abs(reference[1].d)))
    return {"serial_s": min(serial), "parallel_s": min(parallel), "max_rel_diff": agree}


def run_demo(
    n_workers: int | None = None, chunk_size: int = 150, stream=None, serve=None, mode: str = "auto"
) -> dict:
    """Run the demo; print a report to ``stream`` and return its figures.

    With ``serve``, a callable, the Bokeh dashboard of the demo's scheduler is
    started before training (so it shows the whole run), its URL is printed as
    ``labkit dashboard: URL``, and once the report is printed
    ``serve(scheduler, url)`` is called; the cluster and the dashboard stay up
    until it returns.
    """
    out = stream or sys.stdout
    train, (x_test, y_test) = load_chunks(chunk_size)
    data = [[x for x, _ in train], None, train]
    print(
        f"labkit demo: digits, {sum(len(x) for x, _ in train)} training samples in "
        f"{len(train)} chunks, flow PCA(20) -> QuadraticExpansion -> GaussianClassifier",
        file=out,
    )
    started = time.perf_counter()
    with DaskScheduler(n_workers=n_workers, mode=mode) as s:
        threads = sum(s.client.nthreads().values())
        print(
            f"Dask cluster: mode {s.mode!r}, {len(s.client.nthreads())} worker(s), {threads} "
            f"threads in all (started in {time.perf_counter() - started:.1f} s), "
            f"Dask dashboard {s.dashboard_link}",
            file=out,
        )
        url = None
        if serve is not None:
            url = labkit.dashboard(s)  # Bokeh's, imported when served
            print(f"labkit dashboard: {url}", file=out, flush=True)
        workers: Counter[str] = Counter()
        s.subscribe(lambda e: workers.update([e.worker]) if isinstance(e, TaskFinished) else None)
        progress = ConsoleProgress(s, stream=out)
        flow = ParallelFlow(_nodes())
        t0 = time.perf_counter()
        flow.train(data, scheduler=s)
        parallel_s = time.perf_counter() - t0
        features = flow[:-1].execute(np.array_split(x_test, 4), scheduler=s)
        progress.close()
        figures = _compare(flow, features, workers, parallel_s, data, x_test, y_test)
        _report(figures, len(y_test), out)
        print(
            "\nwhere parallel pays off: PCA(30) of the quadratic expansion of 40 features "
            "(860 columns), 24 chunks of 4000 rows from the client ...",
            file=out,
            flush=True,
        )
        speed = time_speed(s)
        figures["speed"] = dict(speed, threads=threads)
        _report_speed(figures["speed"], out)
        if serve is not None:
            serve(s, url)
    return figures


def _compare(flow, features, workers, parallel_s, data, x_test, y_test) -> dict:
    """Train the same flow serially; the demo's figures."""
    predicted = flow[-1].label(features)
    t0 = time.perf_counter()
    serial = Flow(_nodes())
    serial.train(data)
    serial_s = time.perf_counter() - t0
    return {
        "accuracy": float(np.mean(predicted == y_test)),
        "agreement": float(np.mean(predicted == serial[-1].label(serial[:-1].execute(x_test)))),
        "parallel_s": parallel_s,
        "serial_s": serial_s,
        "tasks_per_worker": dict(workers),
        "pca_explained_variance": float(flow[0].explained_variance),
    }


def _report(f: dict, n_test: int, out) -> None:
    print(
        f"\nwhat it learnt:\n  PCA keeps {100 * f['pca_explained_variance']:.1f}% of the "
        f"variance in 20 components\n  test accuracy {100 * f['accuracy']:.1f}% on {n_test} "
        f"held-out digits\n  parallel and serial training agree on "
        f"{100 * f['agreement']:.1f}% of the test labels",
        file=out,
    )
    per_worker = ", ".join(
        f"{w.replace('tcp://', '')}: {n}" for w, n in sorted(f["tasks_per_worker"].items())
    )
    print(
        f"timings on digits:\n  parallel training {f['parallel_s']:.2f} s (tasks per worker "
        f"{per_worker})\n  serial training   {f['serial_s']:.2f} s\n  (digits is small: "
        "each chunk takes about a millisecond, and the cluster's overhead dominates)",
        file=out,
    )


def _report_speed(f: dict, out) -> None:
    ratio = f["serial_s"] / f["parallel_s"]
    verdict = "faster" if ratio > 1 else "SLOWER"
    print(
        f"  serial Flow       {f['serial_s']:.2f} s\n  ParallelFlow      {f['parallel_s']:.2f} s "
        f"on {f['threads']} worker threads\n  => parallel is {ratio:.2f}x {verdict} than "
        f"serial here (best of 2 each; eigenvalues agree within "
        f"{f['max_rel_diff']:.1e})",
        file=out,
    )
