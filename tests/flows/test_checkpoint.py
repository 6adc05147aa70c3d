"""Checkpoints after each node, written atomically; training resumes from them."""

import os

import numpy as np
import pytest

import labkit as lk
from tests import helpers
from tests.flows.cases import X, chunks


def _nodes():
    return [lk.nodes.PCA(output_dim=4), lk.nodes.QuadraticExpansion(),
            lk.nodes.PCA(output_dim=2)]


def test_checkpoint_after_each_node_and_resume(tmp_path, scheduler):
    path = tmp_path / "flow.pkl"
    bad = chunks(X)
    bad[2] = bad[2][:, :3]  # node 2 fails on this chunk (after node 0's checkpoint)
    flow = lk.CheckpointFlow(_nodes())
    with pytest.raises(lk.LabkitError):
        flow.train([chunks(X), None, bad], checkpoints=str(path), scheduler=scheduler)
    assert sorted(os.listdir(tmp_path)) == ["flow.pkl"]  # written, no temp file left
    saved = lk.CheckpointFlow.load(path)
    assert not saved[0].is_training() and saved[2].is_training()
    saved.train([chunks(X), None, chunks(X)], scheduler=scheduler, resume=True)
    serial = lk.Flow(_nodes())
    serial.train([chunks(X), None, chunks(X)])
    for a, b in zip(serial, saved):
        helpers.assert_nodes_equal(a, b)
    np.testing.assert_allclose(saved.execute(X), serial.execute(X), rtol=1e-7, atol=1e-10)


def test_checkpoint_functions_are_called_per_node(scheduler):
    calls = []
    flow = lk.CheckpointFlow(_nodes())
    flow.train([chunks(X), None, chunks(X)], scheduler=scheduler,
               checkpoints=[lambda f, i: calls.append(i), None, lambda f, i: calls.append(i)])
    assert calls == [0, 2]


def test_wrong_number_of_checkpoints():
    with pytest.raises(lk.InputError, match="checkpoints"):
        lk.CheckpointFlow(_nodes()).train([chunks(X), None, chunks(X)], checkpoints=[None])
