"""Every built-in node with data to train it on, for parallel == serial tests."""

import numpy as np

import labkit as lk

RNG = np.random.default_rng(7)
X = RNG.normal(size=(1200, 6)) @ RNG.normal(size=(6, 6)) + 3.0
LABELS = (X[:, 0] + X[:, 1] > 6).astype(int) + (X[:, 2] > 3).astype(int)
Y = X @ RNG.normal(size=(6, 2)) + RNG.normal(scale=0.1, size=(1200, 2))
T = np.arange(1200)
SLOW = np.column_stack([np.sin(T / 50), np.cos(T / 7), RNG.normal(size=1200)]) @ RNG.normal(size=(3, 3))


def chunks(*arrays, n=7):
    """Uneven chunks; tuples when several arrays are given."""
    bounds = np.cumsum([0, 100, 250, 60, 300, 190, 120, 180])
    parts = [tuple(a[bounds[i]:bounds[i + 1]] for a in arrays) for i in range(n)]
    return [p if len(arrays) > 1 else p[0] for p in parts]


# name -> (node factory, chunk list, how to compare outputs)
CASES = {
    "PCA": (lambda: lk.nodes.PCA(output_dim=4), chunks(X)),
    "PCA-fraction": (lambda: lk.nodes.PCA(output_dim=0.9), chunks(X)),
    "Whitening": (lambda: lk.nodes.Whitening(output_dim=3), chunks(X)),
    "SFA": (lambda: lk.nodes.SFA(output_dim=2), chunks(SLOW)),
    "LinearRegression": (lambda: lk.nodes.LinearRegression(), chunks(X, Y)),
    "GaussianClassifier": (lambda: lk.nodes.GaussianClassifier(), chunks(X, LABELS)),
    "FDA": (lambda: lk.nodes.FDA(output_dim=2), chunks(X, LABELS)),
    "KMeans": (lambda: lk.nodes.KMeans(n_clusters=3, max_iter=6), chunks(X)),
    "OnlineLinearRegression": (lambda: lk.nodes.OnlineLinearRegression(learning_rate=0.01),
                               chunks((X - 3) / 5, Y[:, :1] / 20)),
}


def input_for(name):
    """Data to execute a trained node of ``name`` on."""
    return SLOW[:200] if name == "SFA" else ((X[:200] - 3) / 5 if name.startswith("Online") else X[:200])
