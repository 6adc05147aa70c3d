"""A two-layer stacking ensemble: labkit on an embedded Dask cluster vs scikit-learn.

Run ``python benchmarks/bench_ensemble.py`` (full size, about two minutes on 2
cores) or ``--quick`` (a smoke test).  It prints fit times, their ratio and the
held-out accuracy of both; it never asserts on timings.

Both fit the same base estimators with the same 5 folds (out-of-fold class
probabilities) plus a final fit of each on every row, then a logistic
regression on top of the probabilities:

* **scikit-learn**: ``StackingClassifier(estimators, final_estimator, cv=folds,
  n_jobs=2)`` (joblib's process pool).
* **labkit**: ``ParallelProcessing(DaskScheduler(n_workers=2)).stack([base, top])``
  with ``Layer(base, FoldIndex(5), proba=True)`` and
  ``Layer([top], FullIndex(), proba=True)``; the inputs are memory-mapped from
  a cache folder the workers share.
* **labkit SuperLearner**: the scikit-learn estimator front end,
  ``SuperLearner(folds=5, scheduler=DaskScheduler(n_workers=2)).add(base,
  proba=True).add_meta(top)``: the same fits, through ``fit``/``predict``.
* **labkit serial**: the same layers on a ``LocalScheduler`` (for scale).

The data is ``make_classification`` (generated, nothing downloaded); the
cluster is started before the timing.  Variants alternate their order.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time

import numpy as np
import sklearn
from sklearn.datasets import make_classification
from sklearn.ensemble import ExtraTreesClassifier, RandomForestClassifier, StackingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.naive_bayes import GaussianNB
from sklearn.tree import DecisionTreeClassifier

import labkit as lk
from labkit.ensemble import FoldIndex, FullIndex, Layer, ParallelProcessing, SuperLearner

SIZES = {"full": dict(rows=12_000, features=40, trees=60, reps=3),
         "quick": dict(rows=1_000, features=10, trees=5, reps=1)}


def estimators(size):
    return [("logit", LogisticRegression(max_iter=300)),
            ("forest", RandomForestClassifier(n_estimators=size["trees"], random_state=0)),
            ("extra", ExtraTreesClassifier(n_estimators=size["trees"], random_state=0)),
            ("tree", DecisionTreeClassifier(max_depth=12, random_state=0)),
            ("bayes", GaussianNB())]


def fit_sklearn(size, X, y, folds):
    model = StackingClassifier(estimators(size), LogisticRegression(max_iter=500), cv=folds,
                               n_jobs=2, stack_method="predict_proba")
    start = time.perf_counter()
    model.fit(X, y)
    return time.perf_counter() - start, model.predict


def fit_labkit(size, X, y, scheduler):
    base = Layer(estimators(size), FoldIndex(5), proba=True, name="base")
    top = Layer([("top", LogisticRegression(max_iter=500))], FullIndex(), proba=True,
                name="top")
    pp = ParallelProcessing(scheduler)
    start = time.perf_counter()
    pp.stack([base, top], X, y)
    seconds = time.perf_counter() - start
    return seconds, lambda Xt: top.classes_[pp.predict([base, top], Xt).argmax(1)]


def fit_superlearner(size, X, y, scheduler):
    model = (SuperLearner(folds=5, scheduler=scheduler).add(estimators(size), proba=True)
             .add_meta(LogisticRegression(max_iter=500)))
    start = time.perf_counter()
    model.fit(X, y)
    return time.perf_counter() - start, model.predict


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a smoke test")
    args = parser.parse_args(argv)
    size = SIZES["quick" if args.quick else "full"]
    X, y = make_classification(n_samples=size["rows"] + 2000, n_features=size["features"],
                               n_informative=size["features"] // 2, n_classes=5,
                               random_state=0)
    Xt, yt, X, y = X[-2000:], y[-2000:], X[:-2000], y[:-2000]
    folds = FoldIndex(5).folds(len(X))
    print(f"python {sys.version.split()[0]}, scikit-learn {sklearn.__version__}, "
          f"{platform.machine()}; {len(X)} rows x {X.shape[1]} features, 5 classes, "
          f"5 base estimators, 5 folds")
    times = {"sklearn": [], "labkit": [], "superlearner": [], "serial": []}
    accuracy = {}
    with lk.DaskScheduler(n_workers=2, threads_per_worker=1) as dask, \
            lk.LocalScheduler() as local:
        for rep in range(size["reps"]):
            order = ["sklearn", "labkit", "superlearner", "serial"][::1 if rep % 2 else -1]
            for name in order:
                if name == "sklearn":
                    t, predict = fit_sklearn(size, X, y, folds)
                elif name == "superlearner":
                    t, predict = fit_superlearner(size, X, y, dask)
                else:
                    t, predict = fit_labkit(size, X, y, dask if name == "labkit" else local)
                times[name].append(t)
                accuracy[name] = float((predict(Xt) == yt).mean())
    med = {k: statistics.median(v) for k, v in times.items()}
    for name, label in (("sklearn", "StackingClassifier(n_jobs=2)"),
                        ("labkit", "labkit stack, DaskScheduler(2)"),
                        ("superlearner", "SuperLearner, DaskScheduler(2)"),
                        ("serial", "labkit stack, LocalScheduler")):
        print(f"   {label:<32}: fit {med[name]:7.2f} s   held-out accuracy {accuracy[name]:.4f}")
    print(f"   sklearn time / labkit time: {med['sklearn'] / med['labkit']:.2f}  "
          f"(above 1: labkit faster)")
    print(f"   sklearn time / SuperLearner time: "
          f"{med['sklearn'] / med['superlearner']:.2f}  (above 1: SuperLearner faster)")
    print(f"   serial time / labkit time: {med['serial'] / med['labkit']:.2f}")


if __name__ == "__main__":
    main()
