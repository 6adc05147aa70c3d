"""Writes 01-parallel-flows.ipynb (run: python notebooks/make_01.py)."""
from _make import code, md, write

cells = [
    md("# 01 · Parallel flows\n\n"
       "A flow of nodes — PCA → quadratic expansion → Gaussian classifier — trained in parallel "
       "on an embedded Dask cluster (two worker processes on this machine). Each node forks, "
       "trains on chunks of the data on the workers, and is joined back; the live board below "
       "the training cell shows task progress per phase, the load of each worker and the state "
       "of each node growing as the forks are joined in.\n\n"
       "The data is scikit-learn's bundled digits: nothing is downloaded."),
    code("import numpy as np\n"
         "import labkit as lk\n"
         "from labkit.demo import load_chunks\n\n"
         "train, (x_test, y_test) = load_chunks(chunk_size=60)\n"
         "print(f\"{sum(len(x) for x, _ in train)} training digits in {len(train)} chunks, \"\n"
         "      f\"{len(y_test)} held out\")\n"
         "scheduler = lk.DaskScheduler(n_workers=2)   # a LocalCluster on 127.0.0.1\n"
         "scheduler"),
    md("## Train in parallel, watching live\n\n"
       "`wait=False` returns a `Run` at once; as a cell's result it shows its board. "
       "PCA and the classifier train from the chunks (the classifier from `(x, label)` pairs); "
       "the expansion has nothing to learn."),
    code("flow = lk.ParallelFlow([lk.nodes.PCA(output_dim=20), lk.nodes.QuadraticExpansion(),\n"
         "                        lk.nodes.GaussianClassifier()])\n"
         "run = flow.train([[x for x, _ in train], None, train], scheduler=scheduler, wait=False)\n"
         "run"),
    code("run.result()      # waits for the end (the board above keeps updating meanwhile)\n"
         "print('run status:', run.status)\n"
         "print('PCA keeps', round(100 * flow[0].explained_variance, 1), '% of the variance')"),
    md("## Execute and check\n\n"
       "Execution is parallel too, with the output in chunk order."),
    code("features = flow[:-1].execute(np.array_split(x_test, 4), scheduler=scheduler)\n"
         "predicted = flow[-1].label(features)\n"
         "accuracy = float(np.mean(predicted == y_test))\n"
         "print(f'test accuracy: {accuracy:.3f}')"),
    md("## A plot of the result\n\n"
       "The held-out digits on the first two principal components, coloured by the predicted "
       "label (Bokeh, loaded inline so it works offline)."),
    code("from bokeh.io import output_notebook, show\n"
         "from bokeh.palettes import Category10\n"
         "from bokeh.plotting import figure\n"
         "from bokeh.resources import INLINE\n"
         "output_notebook(INLINE, hide_banner=True)\n\n"
         "pcs = flow[0].execute(x_test)\n"
         "p = figure(width=520, height=380, title='held-out digits, PCA 1 vs 2',\n"
         "           x_axis_label='PC 1', y_axis_label='PC 2')\n"
         "p.scatter(pcs[:, 0], pcs[:, 1], size=6, alpha=0.7,\n"
         "          color=[Category10[10][k] for k in predicted])\n"
         "show(p)"),
    code("scheduler.shutdown()   # stops the cluster's processes\n"
         "print('scheduler closed:', scheduler.closed)"),
]
write("01-parallel-flows.ipynb", cells)
