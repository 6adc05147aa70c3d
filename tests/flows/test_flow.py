"""Flow as a list of nodes: indexing, slicing, +, pickling, save/load."""

import os
import pickle

import numpy as np
import pytest

import labkit as lk
from tests.flows.cases import X, chunks


def _flow():
    return lk.Flow([lk.nodes.PCA(output_dim=3), lk.nodes.QuadraticExpansion(),
                    lk.nodes.LinearRegression()])


def test_list_behaviour():
    flow = _flow()
    assert len(flow) == 3
    assert isinstance(flow[0], lk.nodes.PCA)
    head = flow[:2]
    assert type(head) is lk.Flow and len(head) == 2 and head[1] is flow[1]
    longer = flow + lk.nodes.PCA()
    assert len(longer) == 4 and len(flow) == 3
    assert len(head + head) == 4
    assert [type(n).__name__ for n in flow] == ["PCA", "QuadraticExpansion", "LinearRegression"]
    assert flow[1] in flow
    with pytest.raises(lk.InputError, match="not a labkit Node"):
        lk.Flow([lk.nodes.PCA(), "PCA"])


def test_serial_train_execute_and_pickle_round_trip(tmp_path):
    flow = _flow()
    targets = [(c, c[:, :1] ** 2) for c in chunks(X)]
    flow.train([chunks(X), None, targets])
    out = flow.execute(X)
    assert out.shape == (len(X), 1)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(flow)).execute(X), out)
    path = tmp_path / "flow.pkl"
    flow.save(path)
    np.testing.assert_array_equal(lk.Flow.load(path).execute(X), out)
    assert os.listdir(tmp_path) == ["flow.pkl"]  # no temp file left


def test_execute_an_iterable_concatenates_chunk_outputs():
    flow = lk.Flow([lk.nodes.PCA(output_dim=2)])
    flow.train([chunks(X)])
    np.testing.assert_allclose(flow.execute(chunks(X)), flow.execute(X[:1200]))


def test_load_rejects_a_non_flow(tmp_path):
    path = tmp_path / "x.pkl"
    path.write_bytes(pickle.dumps({"not": "a flow"}))
    with pytest.raises(lk.InputError, match="not a labkit Flow"):
        lk.Flow.load(path, trusted=True)      # a pickle file loads only when trusted


def test_atomic_save_keeps_the_old_file_when_pickling_fails(tmp_path):
    import threading
    path = tmp_path / "flow.pkl"
    flow = lk.Flow([lk.nodes.PCA(output_dim=2)])
    flow.save(path)
    before = path.read_bytes()
    flow[0].lock = threading.Lock()  # unpicklable
    with pytest.raises(TypeError):
        flow.save(path)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["flow.pkl"]
