"""Writes 04-ensembles.ipynb (run: python notebooks/make_04.py)."""
import os
import nbformat as nbf

md, code = nbf.v4.new_markdown_cell, nbf.v4.new_code_cell
cells = [
    md("# 04 · Ensembles\n\n"
       "A stacked ensemble of scikit-learn estimators fitted in parallel with "
       "`labkit.ensemble` on an embedded Dask cluster (two worker processes on this "
       "machine), then a parallel parameter search.\n\n"
       "* A **layer** is a set of estimators and an **indexer** saying which rows each fit "
       "sees: `FoldIndex(k)` gives out-of-fold predictions (and a final fit on all rows "
       "for new data), `BlendIndex(f)` fits on one part and predicts the rest, "
       "`FullIndex()` fits and predicts every row.\n"
       "* `ParallelProcessing(scheduler).stack(layers, X, y)` fits the layers in turn, each "
       "on the previous one's predictions; every *(estimator, fold)* is one task, and the "
       "inputs reach each worker once.\n\n"
       "The data is scikit-learn's bundled digits: nothing is downloaded."),
    code("import numpy as np\n"
         "import labkit as lk\n"
         "from labkit.ensemble import (FoldIndex, FullIndex, Layer, ParallelEvaluation,\n"
         "                             ParallelProcessing)\n"
         "from sklearn.datasets import load_digits\n"
         "from sklearn.ensemble import RandomForestClassifier\n"
         "from sklearn.linear_model import LogisticRegression\n"
         "from sklearn.model_selection import train_test_split\n"
         "from sklearn.naive_bayes import GaussianNB\n"
         "from sklearn.neighbors import KNeighborsClassifier\n"
         "from sklearn.pipeline import make_pipeline\n"
         "from sklearn.preprocessing import StandardScaler\n\n"
         "X, y = load_digits(return_X_y=True)\n"
         "X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3,\n"
         "                                                    random_state=0, stratify=y)\n"
         "print(f'{len(y_train)} training digits, {len(y_test)} held out')\n"
         "scheduler = lk.DaskScheduler(n_workers=2)   # a LocalCluster on 127.0.0.1\n"
         "scheduler"),
    md("The scheduler's board shows each layer as one phase (node = the layer) with its "
       "*(estimator, fold)* tasks, and the per-worker task lanes."),
    code("board = lk.board(scheduler)\n"
         "board"),
    md("## Two layers\n\n"
       "The **base** layer holds four different classifiers in two *preprocessing cases*: "
       "`scaled` (a `StandardScaler` fitted on each fit's training rows before the "
       "estimator) and `raw`. With `proba=True` each estimator contributes one column per "
       "class, and `FoldIndex(5)` makes them out-of-fold: every training row is predicted "
       "by fits that never saw it, so the next layer learns how far to trust each model.\n\n"
       "The **meta** layer is one logistic regression fitted on those probabilities "
       "(`FullIndex`: one fit on all rows)."),
    code("base = Layer(\n"
         "    {'scaled': [('logreg', LogisticRegression(max_iter=2000)),\n"
         "                ('knn', KNeighborsClassifier(n_neighbors=3))],\n"
         "     'raw': [('forest', RandomForestClassifier(n_estimators=100, random_state=0)),\n"
         "             ('naive_bayes', GaussianNB())]},\n"
         "    FoldIndex(5, shuffle=True, random_state=0),\n"
         "    preprocessing={'scaled': [StandardScaler()]},\n"
         "    proba=True, name='base')\n"
         "meta = Layer([('meta', LogisticRegression(max_iter=2000))], FullIndex(), name='meta')\n"
         "print(base)\n"
         "print(meta)"),
    md("## Stack in parallel\n\n"
       "`stack` returns the last layer's output on the training rows; "
       "`return_preds=['base', 'meta']` would return every layer's. The base layer is "
       "4 estimators × (5 folds + 1 final fit) = 24 tasks."),
    code("processing = ParallelProcessing(scheduler)\n"
         "train_output = processing.stack([base, meta], X_train, y_train)\n"
         "print('base layer fits kept for new data:', sorted(base.fitted_))\n"
         "print('meta layer output on the training rows:', train_output.shape)\n"
         "print(f'meta training accuracy (out-of-fold inputs): '\n"
         "      f'{np.mean(train_output[:, 0] == y_train):.3f}')"),
    md("## Held-out accuracy, against each base estimator alone\n\n"
       "`predict` sends new data through the final fits of every layer. The base layer's "
       "own output — ten probability columns per estimator — also tells how each base "
       "estimator does on its own."),
    code("stacked = processing.predict([base, meta], X_test)[:, 0]\n"
         "stacked_accuracy = float(np.mean(stacked == y_test))\n\n"
         "probabilities = processing.predict(base, X_test)\n"
         "k = len(base.classes_)\n"
         "single = {}\n"
         "for j, (name, _) in enumerate(base.estimators()):\n"
         "    labels = base.classes_[probabilities[:, j * k:(j + 1) * k].argmax(axis=1)]\n"
         "    single[name] = float(np.mean(labels == y_test))\n"
         "    print(f'  {name:<12} {single[name]:.3f}')\n"
         "best_name = max(single, key=single.get)\n"
         "print(f'stacked ensemble accuracy: {stacked_accuracy:.3f}')\n"
         "print(f'best single base estimator: {best_name} accuracy: {single[best_name]:.3f}')"),
    md("## A parallel parameter search\n\n"
       "`ParallelEvaluation(scheduler).evaluate(estimators, param_grid, X, y, cv=3)` "
       "cross-validates every estimator × parameter set × fold as one task and returns a "
       "table of mean and spread of the scores and the mean fit time, best first. Here "
       "3 + 2 + 2 = 7 candidates, 21 tasks."),
    code("candidates = [\n"
         "    ('knn', KNeighborsClassifier()),\n"
         "    ('logreg', make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))),\n"
         "    ('forest', RandomForestClassifier(n_estimators=50, random_state=0)),\n"
         "]\n"
         "grid = {\n"
         "    'knn': {'n_neighbors': [1, 3, 5]},\n"
         "    'logreg': {'logisticregression__C': [0.1, 1.0]},\n"
         "    'forest': {'max_depth': [5, None]},\n"
         "}\n"
         "table = ParallelEvaluation(scheduler).evaluate(candidates, grid, X_train, y_train, cv=3)\n"
         "table"),
    code("best = table.best()\n"
         "print('evaluation rows:', len(table))\n"
         "print(f\"best: {best['estimator']} {best['params']} \"\n"
         "      f\"mean score: {best['mean']:.3f} ± {best['std']:.3f}\")"),
    code("scheduler.shutdown()   # stops the cluster's processes (the board shows its last state)\n"
         "print('scheduler closed:', scheduler.closed)"),
]
nb = nbf.v4.new_notebook(cells=cells)
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
nb.metadata["language_info"] = {"name": "python"}
nbf.write(nb, os.path.join(os.path.dirname(os.path.abspath(__file__)), "04-ensembles.ipynb"))
