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
    assert len(CASES) >= 60


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
