"""The bad-input table: flows, nodes, pipes, programs, ensembles and scheduler verbs.

Each case makes an object, gives it one bad input, and checks three things: the
error is the labkit type it should be, its message names the place (node,
phase, chunk, stage, argument, ...), and the same object does the right thing
right after.  The trainer's, the schedulers', the views', the command line's
and the checkpoints' cases live next to their tests (``tests/*/test_bad_input.py``,
``tests/flows/test_snapshot.py``).
"""

from __future__ import annotations

import pickle
import threading
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pytest
from sklearn.linear_model import Ridge

import labkit as lk
from labkit.ensemble import BlendIndex, FoldIndex, Layer, ParallelEvaluation, ParallelProcessing
from labkit.nodes import (FDA, PCA, SFA, GaussianClassifier, KMeans, LinearRegression,
                          OnlineLinearRegression, PolynomialExpansion)
from labkit.program import Call, Popen, Program, Registers, Repeat, Seq, Weave
from tests.helpers import FaultyPCA, FussyPCA

RNG = np.random.default_rng(7)
X = RNG.normal(size=(200, 4)) * [3.0, 2.0, 1.0, 0.5]
Y = X @ [1.0, -2.0, 0.5, 3.0]
LABELS = (X[:, 0] > 0).astype(int)


def chunks(n: int = 4) -> list[np.ndarray]:
    return np.array_split(X, n)


def with_bad(value: float, at: tuple[int, int], n: int = 4) -> list[np.ndarray]:
    """``chunks(n)`` with one value of chunk ``at[0]``, row ``at[1]`` replaced."""
    parts = [c.copy() for c in chunks(n)]
    parts[at[0]][at[1], 1] = value
    return parts


def labelled(parts: list[np.ndarray]) -> list[tuple]:
    """Chunks with their labels, for the supervised nodes."""
    split = np.array_split(LABELS, len(parts))
    return list(zip(parts, split))


def targets(parts: list[np.ndarray]) -> list[tuple]:
    split = np.array_split(Y[:, None], len(parts))
    return list(zip(parts, split))


def broken_source(after: int):
    """A chunk source that raises once it has made ``after`` chunks."""
    for i, chunk in enumerate(chunks()):
        if i == after:
            raise RuntimeError("the disk went away")
        yield chunk


def trained(flow: lk.Flow) -> bool:
    return not any(node.is_training() for node in flow.nodes)


def train_ok(flow: lk.Flow) -> None:
    flow.train([chunks()])
    assert trained(flow)


@dataclass
class Case:
    """One bad input: ``bad(make())`` raises ``error`` naming ``names``; ``good`` then works."""

    make: Callable[[], Any]
    bad: Callable[[Any], Any]
    error: type
    names: tuple[str, ...]
    good: Callable[[Any], Any]


def flow_of(*nodes):
    return lambda: lk.Flow(list(nodes))


def pflow_of(*nodes):
    return lambda: lk.ParallelFlow(list(nodes))


def fitted_flow():
    flow = lk.Flow([PCA(output_dim=2)])
    flow.train([chunks()])
    return flow


def execute_ok(flow):
    assert flow.execute(X).shape == (200, 2)


def pipe_ok(_):
    assert sorted(lk.pipe(range(5), processor=lambda r: r * 2)) == [0, 2, 4, 6, 8]


def program_ok(_):
    reg = Registers()
    assert Program(Call(sum, [1, 2], store_to="s"), reg).run() is not None and reg["s"] == 3


def ridge_layer():
    return Layer([("ridge", Ridge())], FoldIndex(2))


def map_ok(pp):
    assert pp.map(ridge_layer(), X, Y).shape == (200, 1)


def evaluate_ok(pe):
    assert len(pe.evaluate([("r", Ridge())], {"r": {"alpha": [0.1, 1.0]}}, X, Y, cv=2)) == 2


def nothing():
    return None


def fussy_chunks():
    """``chunks()`` whose chunk 1 starts with 999, which a FussyPCA refuses."""
    parts = [c.copy() for c in chunks()]
    parts[1][0, 0] = 999
    return parts


def pca_trains(_):
    train_ok(lk.Flow([PCA(output_dim=2)]))


def trains(node_class, data, **params):
    """A good step: a fresh ``node_class(**params)`` trains on ``data``."""
    return lambda _: lk.Flow([node_class(**params)]).train([data])


def joined_once():
    """A PCA and a fork of it trained on ``X`` and joined into it once."""
    node = PCA(output_dim=2)
    fork = node.fork()
    fork.train(X)
    node.join(fork)
    return node, fork


def finish_joined(pair):
    node, _ = pair
    node.stop_training()
    np.testing.assert_allclose(node.avg, X.mean(axis=0))   # the fork counted once


def manual_phase():
    """A ParallelFlow set up for manual training, its tasks taken (not run)."""
    flow = lk.ParallelFlow([PCA(output_dim=2)])
    flow.setup_parallel_training([chunks()])
    flow.tasks = [flow.get_task() for _ in range(4)]
    return flow


def manual_results_ok(flow):
    flow.use_results([callable_.fork()(chunk) for chunk, callable_ in flow.tasks])
    assert not flow.is_parallel_training and not flow[0].is_training()


def manual_execution():
    flow = lk.ParallelFlow([PCA(output_dim=2)])
    train_ok(flow)
    flow.setup_parallel_execution([])
    return flow


def seven():
    return lk.runs.start("demo", [], lambda scope: 7, wait=False)


def in_batch(fn):
    """``fn(batch)`` on a new batch of the scheduler, closed after."""
    def bad(s):
        with s.batch() as b:
            return fn(b)
    return bad


def broken_chunks():
    yield 1
    raise OSError("the disk went away")


def scheduler_ok(s):
    assert s.add_task(2, lambda x: x + 1) is not None and s.get_results() == [3]


CASES: dict[str, Case] = {
    # -- flows: construction, data, sources ------------------------------------------------
    "flow of one bare node": Case(
        nothing, lambda _: lk.Flow(PCA()), lk.InputError, ("list of nodes", "lk.Flow([node])"),
        lambda _: train_ok(lk.Flow([PCA(output_dim=2)]))),
    "flow entry not a node": Case(
        nothing, lambda _: lk.Flow([PCA(), 3]), lk.InputError, ("flow entry 1", "int"),
        lambda _: train_ok(lk.Flow([PCA(output_dim=2)]))),
    "data not a list": Case(
        flow_of(PCA(output_dim=2)), lambda f: f.train(5), lk.InputError,
        ("data_iterables", "int"), train_ok),
    "one iterable too many": Case(
        flow_of(PCA(output_dim=2)), lambda f: f.train([chunks(), chunks()]), lk.InputError,
        ("got 2 for 1 nodes",), train_ok),
    "empty iterable": Case(
        flow_of(PCA(output_dim=2)), lambda f: f.train([[]]), lk.InputError,
        ("empty", "node 0", "phase 0"), train_ok),
    "1-D chunk": Case(
        flow_of(PCA(output_dim=2)), lambda f: f.train([[X[:, 0]]]), lk.InputError,
        ("2-D", "node 0", "chunk 0"), train_ok),
    "string chunk": Case(
        flow_of(PCA(output_dim=2)), lambda f: f.train([["abc"]]), lk.InputError,
        ("2-D", "chunk 0"), train_ok),
    "columns change between chunks": Case(
        flow_of(PCA(output_dim=2)), lambda f: f.train([[X[:50], X[50:, :3]]]), lk.InputError,
        ("input dim 4", "chunk 1"), train_ok),
    "integer dtype": Case(
        flow_of(PCA(output_dim=2)), lambda f: f.train([[X.astype(int)]]), lk.InputError,
        ("dtype int64", "chunk 0"), train_ok),
    "dtype changes between chunks": Case(
        flow_of(PCA(output_dim=2)),
        lambda f: f.train([[X[:50], X[50:].astype(np.float32)]]), lk.InputError,
        ("float32", "chunk 1"), train_ok),
    "source raises midway (serial)": Case(
        flow_of(PCA(output_dim=2)), lambda f: f.train([broken_source(2)]), lk.InputError,
        ("RuntimeError", "the disk went away", "node 0", "phase 0", "chunk 2"), train_ok),
    "source raises midway (parallel, local)": Case(
        pflow_of(PCA(output_dim=2)), lambda f: f.train([broken_source(1)]), lk.InputError,
        ("RuntimeError", "node 0", "phase 0", "chunk 1"), train_ok),
    "source raises at once": Case(
        flow_of(PCA(output_dim=2)), lambda f: f.train([broken_source(0)]), lk.InputError,
        ("RuntimeError", "chunk 0"), train_ok),
    "one-shot iterator for two phases": Case(
        flow_of(FDA()), lambda f: f.train([iter(labelled(chunks()))]), lk.InputError,
        ("several phases", "FDA"), lambda f: f.train([labelled(chunks())])),
    "scheduler given as an address": Case(
        pflow_of(PCA(output_dim=2)), lambda f: f.train([chunks()], scheduler="tcp://x:8786"),
        lk.InputError, ("lk.DaskScheduler('tcp://x:8786')",), train_ok),
    "scheduler not a scheduler": Case(
        pflow_of(PCA(output_dim=2)), lambda f: f.train([chunks()], scheduler=5), lk.InputError,
        ("scheduler", "int"), train_ok),
    "unknown join mode": Case(
        pflow_of(PCA(output_dim=2)), lambda f: f.train([chunks()], join="tree"), lk.InputError,
        ("join", "'tree'"), train_ok),
    "ragged rows in a chunk": Case(
        flow_of(PCA(output_dim=2)), lambda f: f.train([[[X[0], X[1, :2]]]]), lk.InputError,
        ("2-D", "list", "node 0", "chunk 0"), train_ok),
    "chunk without columns": Case(
        flow_of(PCA(output_dim=2)), lambda f: f.train([[np.empty((10, 0))]]), lk.InputError,
        ("at least one column", "chunk 0"), train_ok),
    "(x, y) chunks for a node of x alone": Case(
        flow_of(PCA(output_dim=2)), lambda f: f.train([targets(chunks())]), lk.InputError,
        ("PCA trains on x alone", "node 0", "phase 0", "chunk 0"), train_ok),
    "(x, y) chunks for a node of x alone (parallel)": Case(
        pflow_of(PCA(output_dim=2)), lambda f: f.train([targets(chunks())]), lk.InputError,
        ("PCA trains on x alone", "node 0", "chunk"), train_ok),
    "string targets": Case(
        flow_of(LinearRegression()),
        lambda f: f.train([[(X[:3], np.array(["a", "b", "c"]))]]), lk.InputError,
        ("numeric targets", "'LinearRegression'", "chunk 0"),
        lambda f: f.train([targets(chunks())])),
    "a node's _train raises (serial)": Case(
        flow_of(FussyPCA(output_dim=2)), lambda f: f.train([fussy_chunks()]),
        lk.TaskError, ("FussyPCA._train failed with ValueError", "999", "node 0", "phase 0",
                       "chunk 1"), train_ok),
    "a node's _stop_training raises (serial)": Case(
        flow_of(FaultyPCA("_stop_training", output_dim=2)), lambda f: f.train([chunks()]),
        lk.TaskError, ("FaultyPCA._stop_training failed with ValueError", "node 0", "phase 0"),
        lambda f: (setattr(f[0], "fails_in", None), train_ok(f))),
    "a node's _execute raises (serial)": Case(
        lambda: lk.Flow([FaultyPCA(output_dim=2)]),
        lambda f: (train_ok(f), setattr(f[0], "fails_in", "_execute"), f.execute(chunks())),
        lk.TaskError, ("FaultyPCA._execute failed with ValueError", "node 0", "chunk 0"),
        lambda f: (setattr(f[0], "fails_in", None), execute_ok(f))),
    "a node's _fork raises (parallel)": Case(
        pflow_of(FaultyPCA("_fork", output_dim=2)), lambda f: f.train([chunks()]),
        lk.TaskError, ("FaultyPCA._fork failed with ValueError", "node 0", "phase 0"),
        lambda f: (setattr(f[0], "fails_in", None), train_ok(f))),
    # -- non-finite data: named by node, phase and chunk, statistics untouched --------------
    "NaN in a PCA chunk": Case(
        flow_of(PCA(output_dim=2)), lambda f: f.train([with_bad(np.nan, (2, 5))]),
        lk.InputError, ("NaN or inf", "not finite", "node 0 'PCA'", "phase 0", "chunk 2"),
        train_ok),
    "inf in a PCA chunk (parallel)": Case(
        pflow_of(PCA(output_dim=2)), lambda f: f.train([with_bad(np.inf, (3, 0))]),
        lk.InputError, ("NaN or inf", "phase 0", "chunk 3"), train_ok),
    "NaN in the last row of an SFA chunk": Case(
        flow_of(SFA(output_dim=2)), lambda f: f.train([with_bad(np.nan, (1, -1))]),
        lk.InputError, ("NaN or inf", "'SFA'", "chunk 1"),
        lambda f: f.train([chunks()])),
    "inf into a linear regression": Case(
        flow_of(LinearRegression()), lambda f: f.train([targets(with_bad(np.inf, (0, 3)))]),
        lk.InputError, ("NaN or inf", "'LinearRegression'", "chunk 0"),
        lambda f: f.train([targets(chunks())])),
    "NaN into an online regression": Case(
        flow_of(OnlineLinearRegression()),
        lambda f: f.train([targets(with_bad(np.nan, (1, 2)))]), lk.InputError,
        ("NaN or inf", "chunk 1"), lambda f: f.train([targets(chunks())])),
    "NaN into a Gaussian classifier": Case(
        flow_of(GaussianClassifier()), lambda f: f.train([labelled(with_bad(np.nan, (2, 0)))]),
        lk.InputError, ("NaN or inf", "chunk 2"), lambda f: f.train([labelled(chunks())])),
    "NaN into FDA": Case(
        flow_of(FDA()), lambda f: f.train([labelled(with_bad(np.nan, (0, 0)))]),
        lk.InputError, ("NaN or inf", "'FDA'", "phase 0", "chunk 0"),
        lambda f: f.train([labelled(chunks())])),
    "inf into k-means": Case(
        flow_of(KMeans(n_clusters=2)), lambda f: f.train([with_bad(-np.inf, (1, 1))]),
        lk.InputError, ("NaN or inf", "'KMeans'", "chunk 1"), lambda f: f.train([chunks()])),
    # -- node parameters ----------------------------------------------------------------------
    "PCA output_dim -1": Case(
        nothing, lambda _: PCA(output_dim=-1), lk.InputError, ("output_dim", "-1", "'PCA'"),
        lambda _: train_ok(lk.Flow([PCA(output_dim=2)]))),
    "PCA output_dim beyond the input": Case(
        flow_of(PCA(output_dim=9)), lambda f: f.train([chunks()]), lk.InputError,
        ("output_dim 9", "input dim 4"),
        lambda f: (setattr(f, "nodes", [PCA(output_dim=2)]), train_ok(f))),
    "k-means with 0 clusters": Case(
        nothing, lambda _: KMeans(n_clusters=0), lk.InputError, ("n_clusters", "'KMeans'"),
        lambda _: KMeans(n_clusters=2)),
    "expansion degree 0": Case(
        nothing, lambda _: PolynomialExpansion(degree=0), lk.InputError, ("degree", "0"),
        lambda _: PolynomialExpansion(degree=2)),
    "regression without targets": Case(
        flow_of(LinearRegression()), lambda f: f.train([chunks()]), lk.InputError,
        ("needs targets", "chunk 0"), lambda f: f.train([targets(chunks())])),
    "FDA output_dim 0": Case(
        nothing, lambda _: FDA(output_dim=0), lk.InputError, ("output_dim", "0", "'FDA'"),
        trains(FDA, labelled(chunks()))),
    "FDA output_dim 1.5": Case(
        nothing, lambda _: FDA(output_dim=1.5), lk.InputError, ("output_dim", "1.5", "'FDA'"),
        trains(FDA, labelled(chunks()))),
    "FDA output_dim beyond the input": Case(
        flow_of(FDA(output_dim=9)), lambda f: f.train([labelled(chunks())]), lk.InputError,
        ("output_dim 9", "input dim 4", "phase 0", "chunk 0"),
        lambda f: (setattr(f, "nodes", [FDA()]), f.train([labelled(chunks())]))),
    "k-means n_clusters 2.5": Case(
        nothing, lambda _: KMeans(n_clusters=2.5), lk.InputError, ("n_clusters", "2.5"),
        trains(KMeans, chunks(), n_clusters=2)),
    "k-means n_clusters a word": Case(
        nothing, lambda _: KMeans(n_clusters="abc"), lk.InputError, ("n_clusters", "'abc'"),
        trains(KMeans, chunks(), n_clusters=2)),
    "k-means tol a word": Case(
        nothing, lambda _: KMeans(2, tol="x"), lk.InputError, ("tol", "'x'", "'KMeans'"),
        trains(KMeans, chunks(), n_clusters=2)),
    "k-means max_iter 2.5": Case(
        nothing, lambda _: KMeans(2, max_iter=2.5), lk.InputError, ("max_iter", "2.5"),
        trains(KMeans, chunks(), n_clusters=2)),
    "classifier reg a word": Case(
        nothing, lambda _: GaussianClassifier(reg="a"), lk.InputError,
        ("reg", "'a'", "'GaussianClassifier'"), trains(GaussianClassifier, labelled(chunks()))),
    "classifier reg NaN": Case(
        nothing, lambda _: GaussianClassifier(reg=float("nan")), lk.InputError,
        ("reg", "nan"), trains(GaussianClassifier, labelled(chunks()))),
    "regression reg None": Case(
        nothing, lambda _: LinearRegression(reg=None), lk.InputError,
        ("reg", "None", "'LinearRegression'"), trains(LinearRegression, targets(chunks()))),
    "online learning_rate a word": Case(
        nothing, lambda _: OnlineLinearRegression(learning_rate="x"), lk.InputError,
        ("learning_rate", "'x'"), trains(OnlineLinearRegression, targets(chunks()))),
    "online epochs 1.5": Case(
        nothing, lambda _: OnlineLinearRegression(epochs=1.5), lk.InputError,
        ("epochs", "1.5"), trains(OnlineLinearRegression, targets(chunks()))),
    "node dtype unknown": Case(
        nothing, lambda _: PCA(dtype="foo"), lk.InputError, ("dtype", "'foo'", "'PCA'"),
        pca_trains),
    "node dtype it does not support": Case(
        nothing, lambda _: PCA(dtype="int64"), lk.InputError, ("int64", "supported"),
        pca_trains),
    "node input_dim 0": Case(
        nothing, lambda _: PCA(input_dim=0), lk.InputError, ("input_dim", "0", "'PCA'"),
        pca_trains),
    "node input_dim a str": Case(
        nothing, lambda _: SFA(input_dim="4"), lk.InputError, ("input_dim", "'4'", "'SFA'"),
        pca_trains),
    # -- fork and join, and the manual task API ----------------------------------------------
    "join a fork twice": Case(
        joined_once, lambda pair: pair[0].join(pair[1]), lk.TrainingError,
        ("joined already", "twice", "'PCA'"), finish_joined),
    "join a number": Case(
        lambda: PCA(output_dim=2), lambda n: n.join(5), lk.TrainingError,
        ("join takes a fork", "int", "'PCA'"), lambda n: (n.train(X), n.stop_training())),
    "join a fork of another node": Case(
        lambda: PCA(output_dim=2), lambda n: n.join(SFA().fork()), lk.TrainingError,
        ("join takes a fork", "SFA"), lambda n: (n.train(X), n.stop_training())),
    "use_results of junk": Case(
        manual_phase, lambda f: f.use_results([5]), lk.TrainingError,
        ("join takes a fork", "int", "node 0"), manual_results_ok),
    "use_results of a number": Case(
        manual_phase, lambda f: f.use_results(5), lk.InputError, ("use_results", "int"),
        manual_results_ok),
    "use_results of no results (execute)": Case(
        manual_execution, lambda f: f.use_results([]), lk.InputError, ("no results",),
        execute_ok),
    # -- execute --------------------------------------------------------------------------------
    "execute before training": Case(
        flow_of(PCA(output_dim=2)), lambda f: f.execute(X), lk.TrainingError,
        ("trained before execute", "'PCA'"), lambda f: (train_ok(f), execute_ok(f))),
    "execute nodenr past the end": Case(
        fitted_flow, lambda f: f.execute(X, nodenr=5), lk.InputError,
        ("nodenr", "0 to 0", "5"), execute_ok),
    "execute nodenr negative": Case(
        fitted_flow, lambda f: f.execute(X, nodenr=-1), lk.InputError, ("nodenr", "-1"),
        execute_ok),
    "execute with other columns": Case(
        fitted_flow, lambda f: f.execute(np.ones((3, 7))), lk.InputError,
        ("input dim 4", "got 7"), execute_ok),
    "execute None": Case(
        fitted_flow, lambda f: f.execute(None), lk.InputError, ("NoneType",), execute_ok),
    # -- pipes ----------------------------------------------------------------------------------
    "pipe num_threads -1": Case(
        nothing, lambda _: lk.pipe(range(3), num_threads=-1), lk.InputError,
        ("num_threads", "-1"), pipe_ok),
    "pipe capacity 0": Case(
        nothing, lambda _: lk.pipe(range(3), capacity=0), lk.InputError, ("capacity", "0"),
        pipe_ok),
    "pipe capacity a string": Case(
        nothing, lambda _: lk.pipe(range(3), capacity="10"), lk.InputError,
        ("capacity", "'10'"), pipe_ok),
    "pipe processor not callable": Case(
        nothing, lambda _: lk.pipe(range(3), processor=5, name="decode"), lk.InputError,
        ("processor", "stage decode"), pipe_ok),
    "pipe input not iterable": Case(
        nothing, lambda _: lk.pipe(5), lk.InputError, ("input must be iterable",), pipe_ok),
    "pipe output of the wrong kind": Case(
        nothing, lambda _: lk.pipe(range(3), output=5), lk.InputError, ("output", "int"),
        pipe_ok),
    "pipe on_event of the wrong kind": Case(
        nothing, lambda _: lk.pipe(range(3), on_event=5), lk.InputError, ("on_event",),
        pipe_ok),
    "pipe final output not a reducer": Case(
        nothing, lambda _: lk.pipe_and_output(range(3), final_outputs={"total": 5}),
        lk.InputError, ("final output 'total'",), pipe_ok),
    "pipe processor raises on record 2": Case(
        nothing, lambda _: list(lk.pipe(range(5), processor=lambda r: 1 / (r - 2),
                                        name="invert", ordered=True)),
        lk.LabkitError, ("stage invert", "record 2", "ZeroDivisionError"), pipe_ok),
    # -- programs -------------------------------------------------------------------------------
    "program of a number": Case(
        nothing, lambda _: Program(5), lk.InputError, ("program element", "5"), program_ok),
    "repeat count negative": Case(
        nothing, lambda _: Repeat(-1, Call(print)), lk.InputError, ("Repeat count", "-1"),
        program_ok),
    "call of a number": Case(
        nothing, lambda _: Call(5), lk.InputError, ("Call needs a callable",), program_ok),
    "seq of numbers": Case(
        nothing, lambda _: Seq([1, 2]), lk.InputError, ("Seq item 0",), program_ok),
    "weave needs more than it has": Case(
        nothing, lambda _: Weave(5, [Call(print)]), lk.InputError, ("n_required", "0..1"),
        program_ok),
    "popen of a number": Case(
        nothing, lambda _: Popen(5), lk.InputError, ("Popen needs a command",), program_ok),
    "register never set": Case(
        Registers, lambda reg: reg["nope"], lk.LabkitError, ("register 'nope'",),
        lambda reg: (reg.__setitem__("nope", 1), reg["nope"] == 1)),
    "program step raises": Case(
        lambda: Program(Seq([Call(lambda: 1), Call(lambda: 1 / 0)])), lambda p: p.run(),
        lk.LabkitError, ("ZeroDivisionError", "step 1"), program_ok),
    # -- ensembles ------------------------------------------------------------------------------
    "layer without estimators": Case(
        nothing, lambda _: Layer([]), lk.InputError, ("at least one estimator",),
        lambda _: map_ok(ParallelProcessing())),
    "layer of a number": Case(
        nothing, lambda _: Layer([5]), lk.InputError, ("estimator 'int'", "fit"),
        lambda _: map_ok(ParallelProcessing())),
    "one fold": Case(
        nothing, lambda _: FoldIndex(1), lk.InputError, ("n_splits >= 2", "1"),
        lambda _: FoldIndex(2)),
    "blend of 150%": Case(
        nothing, lambda _: BlendIndex(1.5), lk.InputError, ("test_size", "1.5"),
        lambda _: BlendIndex(0.5)),
    "unknown cache mode": Case(
        nothing, lambda _: ParallelProcessing(cache="disk"), lk.InputError, ("cache", "'disk'"),
        lambda _: map_ok(ParallelProcessing())),
    "ensemble scheduler given as an address": Case(
        nothing, lambda _: ParallelProcessing("tcp://x:8786"), lk.InputError,
        ("lk.DaskScheduler('tcp://x:8786')",), lambda _: map_ok(ParallelProcessing())),
    "map on 1-D X": Case(
        ParallelProcessing, lambda pp: pp.map(ridge_layer(), X[:, 0], Y), lk.InputError,
        ("2-D", "layer"), map_ok),
    "map with fewer targets than rows": Case(
        ParallelProcessing, lambda pp: pp.map(ridge_layer(), X, Y[:10]), lk.InputError,
        ("200 rows", "10"), map_ok),
    "more folds than rows": Case(
        ParallelProcessing, lambda pp: pp.map(Layer([Ridge()], FoldIndex(5)), X[:3], Y[:3]),
        lk.InputError, ("5 folds", "got 3", "layer layer"), map_ok),
    "stack of no layers": Case(
        ParallelProcessing, lambda pp: pp.stack([], X, Y), lk.InputError, ("at least one layer",),
        map_ok),
    "predict before fitting": Case(
        ParallelProcessing, lambda pp: pp.predict([ridge_layer()], X), lk.InputError,
        ("before the layer was fitted",), map_ok),
    "grid values not a list": Case(
        ParallelEvaluation,
        lambda pe: pe.evaluate([("r", Ridge())], {"r": {"alpha": 5}}, X, Y, cv=2),
        lk.InputError, ("param_grid['r']['alpha']", "list"), evaluate_ok),
    "grid names a parameter the estimator lacks": Case(
        ParallelEvaluation,
        lambda pe: pe.evaluate([("r", Ridge())], {"r": {"alpah": [1]}}, X, Y, cv=2),
        lk.InputError, ("'alpah'", "estimator r"), evaluate_ok),
    "grid names an unknown estimator": Case(
        ParallelEvaluation,
        lambda pe: pe.evaluate([("r", Ridge())], {"lasso": {"alpha": [1]}}, X, Y, cv=2),
        lk.InputError, ("unknown estimator", "lasso"), evaluate_ok),
    "unknown scorer name": Case(
        ParallelEvaluation,
        lambda pe: pe.evaluate([("r", Ridge())], None, X, Y, cv=2, scoring="accuracy_pct"),
        lk.InputError, ("scoring", "'accuracy_pct'"), evaluate_ok),
    # -- scheduler verbs ------------------------------------------------------------------------
    "task callable not callable": Case(
        lk.LocalScheduler, lambda s: s.add_task(1, 5), lk.InputError, ("task_callable", "int"),
        lambda s: (s.add_task(2, lambda x: x + 1), s.get_results() == [3])),
    "result container of a number": Case(
        nothing, lambda _: lk.LocalScheduler(result_container=5), lk.InputError,
        ("result_container", "int"), lambda _: scheduler_ok(lk.LocalScheduler())),
    "batch of a list": Case(
        lk.LocalScheduler, lambda s: s.batch([]), lk.InputError, ("result_container", "list"),
        scheduler_ok),
    "result container set to a str": Case(
        lk.LocalScheduler, lambda s: setattr(s, "result_container", "x"), lk.InputError,
        ("result_container", "str"), scheduler_ok),
    "add_tasks of a number": Case(
        lk.LocalScheduler, in_batch(lambda b: b.add_tasks(5, lambda x: x)), lk.InputError,
        ("add_tasks", "cannot be iterated"), scheduler_ok),
    "add_tasks of a source that raises": Case(
        lk.LocalScheduler, in_batch(lambda b: b.add_tasks(broken_chunks(), lambda x: x)),
        lk.InputError, ("add_tasks", "OSError", "chunk 1"), scheduler_ok),
    "function callable of a number": Case(
        nothing, lambda _: lk.FunctionCallable(5), lk.InputError, ("FunctionCallable", "int 5"),
        lambda _: scheduler_ok(lk.LocalScheduler())),
    "on_shutdown of a number": Case(
        lk.LocalScheduler, lambda s: s.on_shutdown(5), lk.InputError, ("on_shutdown", "int"),
        scheduler_ok),
    "subscribe a number": Case(
        lk.LocalScheduler, lambda s: s.subscribe(5), lk.InputError, ("subscribe", "int"),
        scheduler_ok),
    "subscribe with state_every a word": Case(
        lk.LocalScheduler, lambda s: s.subscribe(print, state_every="x"), lk.InputError,
        ("state_every", "'x'"), scheduler_ok),
    # -- runs -------------------------------------------------------------------------------------
    "done callback of a number": Case(
        seven, lambda r: r.add_done_callback(5), lk.InputError, ("add_done_callback", "int 5"),
        lambda r: r.result(10) == 7),
    "run result with a timeout word": Case(
        seven, lambda r: r.result(timeout="5"), lk.InputError, ("timeout", "'5'"),
        lambda r: r.result(10) == 7),
    "run wait with a negative timeout": Case(
        seven, lambda r: r.wait(-1), lk.InputError, ("timeout", "-1"),
        lambda r: (r.wait(10), r.result(10) == 7)),
    "add_task before any callable": Case(
        lk.LocalScheduler, lambda s: s.add_task(1), lk.SchedulerError, ("task_callable",),
        lambda s: (s.add_task(2, lambda x: x + 1), s.get_results() == [3])),
}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_is_a_located_labkit_error_and_nothing_is_lost(name):
    case = CASES[name]
    obj = case.make()
    try:
        with pytest.raises(case.error) as info:
            case.bad(obj)
        assert isinstance(info.value, lk.LabkitError), type(info.value)
        message = str(info.value)
        missing = [word for word in case.names if word not in message]
        assert not missing, f"{message!r} does not name {missing}"
        result = case.good(obj)
        if isinstance(result, tuple):
            assert all(part is not False for part in result), result
    finally:
        if isinstance(obj, lk.Scheduler):
            obj.shutdown()


def test_the_table_covers_every_area():
    assert len(CASES) >= 100


def test_registers_hold_the_good_value_after_a_bad_read():
    reg = Registers()
    with pytest.raises(lk.LabkitError):
        reg["x"]
    reg["x"] = 2
    assert pickle.loads(pickle.dumps(reg))["x"] == 2


# -- on the Dask scheduler too: the same errors, located the same way -----------------------

DASK_CASES = {
    "source raises midway": (lambda: [broken_source(2)], ("RuntimeError", "phase 0", "chunk 2")),
    "NaN in a chunk": (lambda: [with_bad(np.nan, (1, 3))], ("NaN or inf", "phase 0", "chunk 1")),
    "a chunk that cannot be pickled": (
        lambda: [[X[:100], (X[100:], threading.Lock())]], ("chunk 1",)),
}


@pytest.mark.parametrize("name", list(DASK_CASES))
def test_bad_input_on_dask_is_located_and_the_scheduler_goes_on(name, dask_scheduler):
    data, names = DASK_CASES[name]
    flow = lk.ParallelFlow([PCA(output_dim=2)])
    with pytest.raises(lk.InputError) as info:
        flow.train(data(), scheduler=dask_scheduler)
    message = str(info.value)
    assert all(word in message for word in names), message
    assert flow[0].is_training() and flow[0].samples_seen == 0   # nothing half-trained kept
    flow.train([chunks()], scheduler=dask_scheduler)
    serial = lk.Flow([PCA(output_dim=2)])
    serial.train([chunks()])
    np.testing.assert_allclose(np.abs(flow.execute(X)), np.abs(serial.execute(X)), atol=1e-8)
    assert dask_scheduler.n_open_tasks == 0
