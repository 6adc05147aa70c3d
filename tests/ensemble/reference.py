"""Sequential reference fits with the same folds, and small estimators for the tests."""

from __future__ import annotations

import time

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin, clone


def sequential_layer(layer, X, y):
    """A layer's output computed one fit at a time, without labkit's machinery."""
    n = len(X)
    folds, rows = layer.indexer.folds(n), layer.indexer.output_rows(n)
    classes = np.unique(y) if layer.proba else None
    pos = {r: i for i, r in enumerate(rows)}
    columns = [X[rows][:, layer.propagate_features]] if layer.propagate_features else []
    for name, est in layer.estimators():
        steps = layer.preprocessing.get(layer.case_of(name), [])
        col = np.zeros((len(rows), len(classes) if layer.proba else 1))
        for train, test in folds:
            Xtr, Xte = X[train], X[test]
            for step in steps:
                t = clone(step).fit(Xtr, y[train])
                Xtr, Xte = t.transform(Xtr), t.transform(Xte)
            model = clone(est).fit(Xtr, y[train])
            if layer.proba:
                p = np.zeros((len(test), len(classes)))
                p[:, np.searchsorted(classes, model.classes_)] = model.predict_proba(Xte)
            else:
                p = model.predict(Xte).reshape(len(test), -1)
            col[[pos[t] for t in test]] = p
        columns.append(col)
    return np.hstack(columns), rows


class Boom(BaseEstimator, RegressorMixin):
    """Fails to fit on purpose."""

    def fit(self, X, y):
        raise ValueError("boom on purpose")

    def predict(self, X):
        return np.zeros(len(X))


class Sleepy(BaseEstimator, RegressorMixin):
    """Predicts the mean after sleeping a while in fit."""

    def __init__(self, seconds=0.2):
        self.seconds = seconds

    def fit(self, X, y):
        time.sleep(self.seconds)
        self.mean_ = float(np.mean(y))
        return self

    def predict(self, X):
        return np.full(len(X), self.mean_)
