"""The fork/join contract: a fork hands a Partial; a join merges it; nobody reads privates."""

import numpy as np
import pytest

import labkit as lk
from labkit.flows.node import Partial
from tests import helpers
from tests.architecture import PACKAGE, private_reaches

X = np.random.default_rng(0).normal(size=(60, 4))
Y = X @ np.arange(4.0)[:, None]
LABELS = np.arange(60) % 3

# every built-in node that forks, with one chunk it trains on
FORKING = [
    (lk.nodes.PCA, {}, (X,)),
    (lk.nodes.Whitening, {}, (X,)),
    (lk.nodes.SFA, {}, (X,)),
    (lk.nodes.LinearRegression, {}, (X, Y)),
    (lk.nodes.GaussianClassifier, {}, (X, LABELS)),
    (lk.nodes.FDA, {}, (X, LABELS)),
    (lk.nodes.KMeans, {"n_clusters": 3}, (X,)),
]


@pytest.mark.parametrize("cls, options, chunk", FORKING, ids=lambda v: getattr(v, "__name__", ""))
def test_a_builtin_fork_hands_its_statistics_not_itself(cls, options, chunk):
    node = cls(**options)
    fork = node.fork()
    fork.train(*chunk)
    partial = fork.partial()
    assert isinstance(partial, Partial)
    assert partial.phase == 0 and partial.samples == 60 and partial.input_dim == 4
    assert partial.dtype == np.float64
    assert partial.statistics is not fork  # declared by the node's _partial
    assert not fork.joined
    node.join(fork)
    assert fork.joined and node.samples_seen == 60 and node.joins == 1
    with pytest.raises(lk.TrainingError, match="joined already"):
        node.join(fork)


def test_a_user_node_without_partial_joins_the_fork_itself():
    """``_partial`` defaults to the fork: a node written against ``_join(forked)`` still works."""
    node = helpers.RowCounter()
    fork = node.fork()
    fork.execute(np.ones((5, 2)))
    assert fork.partial().statistics is fork
    node.join(fork)
    assert node.rows == 5 and node.total == 10.0


def test_begin_fork_copies_the_parents_place_and_starts_empty():
    parent = lk.nodes.PCA(input_dim=4, name="mine", check_finite=True)
    parent.train(X)
    fresh = lk.nodes.PCA()
    fresh.begin_fork(parent)
    assert (fresh.name, fresh.phase, fresh.input_dim, fresh.dtype, fresh.check_finite) == (
        "mine", 0, 4, np.float64, True)
    assert fresh.samples_seen == 0 and fresh.joins == 0 and not fresh.joined


def test_check_fork_refuses_strangers_and_other_phases_before_any_join():
    node = lk.nodes.KMeans(n_clusters=2)
    with pytest.raises(lk.TrainingError, match="takes a fork of this node"):
        node.check_fork(lk.nodes.PCA())
    fork = node.fork()
    fork.train(X)
    node.join(fork)
    node.stop_training()  # phase 1 now
    old = lk.nodes.KMeans(n_clusters=2)
    old.begin_fork(lk.nodes.KMeans(n_clusters=2))  # a phase-0 fork
    with pytest.raises(lk.TrainingError, match="fork of phase 0"):
        node.check_fork(old)


def test_flows_nodes_and_checkpoints_reach_no_private_members():
    found = [r for r in private_reaches(PACKAGE)
             if r.startswith(("labkit.flows", "labkit.nodes", "labkit.checkpoints"))]
    assert found == []
