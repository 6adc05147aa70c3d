"""The same work run by labkit's peers, for ``bench_core.py`` to time beside labkit.

Each runner takes a function of one chunk index and the indices, runs the
calls in parallel on ``n`` slots and folds their results with ``fold`` as
they come, as labkit's ``ParallelFlow`` does.  A peer that is not installed
is reported and left out: install them for the benchmark only, e.g.::

    pip install --target /tmp/peers ray      # joblib comes with scikit-learn
    PYTHONPATH=/tmp/peers python benchmarks/bench_core.py --only 5
"""

from __future__ import annotations

import importlib.util
import time

__all__ = ["available", "JoblibThreads", "RayTasks"]


def available(module: str) -> bool:
    """Whether ``module`` can be imported here."""
    return importlib.util.find_spec(module) is not None


class JoblibThreads:
    """joblib's ``Parallel(prefer="threads")``, BLAS held to one thread per slot like labkit's."""

    name = "joblib threads"

    def __init__(self, n: int):
        from joblib import Parallel

        self.parallel = Parallel(n_jobs=n, prefer="threads", return_as="generator_unordered")

    def run(self, fn, indices, fold):
        from joblib import delayed
        from threadpoolctl import threadpool_limits

        t0 = time.perf_counter()
        with threadpool_limits(limits=1):
            acc = None
            for result in self.parallel(delayed(fn)(i) for i in indices):
                acc = fold(acc, result)
        return time.perf_counter() - t0, acc

    def close(self):
        pass


class RayTasks:
    """Ray remote tasks on a local Ray of ``n`` CPUs (its workers run one BLAS thread each)."""

    name = "Ray tasks"

    def __init__(self, n: int):
        import ray

        self.ray = ray
        ray.init(
            num_cpus=n,
            include_dashboard=False,
            object_store_memory=2 * 2**30,
            log_to_driver=False,
            logging_level="ERROR",
        )

    def run(self, fn, indices, fold):
        ray = self.ray

        def call(i):  # Ray takes functions, not partials
            return fn(i)

        remote = ray.remote(num_cpus=1)(call)
        t0 = time.perf_counter()
        pending = [remote.remote(i) for i in indices]
        acc = None
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            acc = fold(acc, ray.get(done[0]))
        return time.perf_counter() - t0, acc

    def close(self):
        self.ray.shutdown()
