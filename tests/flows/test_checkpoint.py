"""Checkpoints after each node, written atomically; training resumes from them."""

import errno
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


def test_a_missing_checkpoint_folder_is_an_error_before_node_0_trains(tmp_path, local_scheduler):
    flow = lk.CheckpointFlow(_nodes())
    data = [chunks(X), None, chunks(X)]
    with pytest.raises(lk.InputError, match="/missing/folder does not exist") as info:
        flow.train(data, checkpoints="/missing/folder/f.lk", scheduler=local_scheduler)
    assert info.value.where["path"] == "/missing/folder/f.lk"
    assert flow[0].is_training() and flow[0].samples_seen == 0  # node 0 never started
    with pytest.raises(lk.InputError, match="is a folder"):
        flow.train(data, checkpoints=[None, None, tmp_path], scheduler=local_scheduler)
    assert flow[0].is_training()
    flow.train(data, checkpoints=tmp_path / "f.lk", scheduler=local_scheduler)
    assert not lk.CheckpointFlow.load(tmp_path / "f.lk")[2].is_training()


@pytest.mark.parametrize("bad, message", [
    (42, "checkpoints must be a file path, a function.*got int 42"),
    ([None, 3.5, None], "checkpoint 1 must be a file path, a function or None, got float"),
])
def test_checkpoints_of_the_wrong_type_are_input_errors(tmp_path, local_scheduler, bad, message):
    flow = lk.CheckpointFlow(_nodes())
    data = [chunks(X), None, chunks(X)]
    with pytest.raises(lk.InputError, match=message):
        flow.train(data, checkpoints=bad, scheduler=local_scheduler)
    assert flow[0].is_training()
    flow.train(data, checkpoints=str(tmp_path / "f.lk"), scheduler=local_scheduler)
    assert all(not node.is_training() for node in lk.CheckpointFlow.load(tmp_path / "f.lk"))


def test_checkpoints_are_safe_files_and_pickle_is_opt_in(tmp_path, local_scheduler):
    import zipfile
    flow = lk.CheckpointFlow(_nodes())
    data = [chunks(X), None, chunks(X)]
    safe, old = tmp_path / "f.lk", tmp_path / "f.pkl"
    flow.train(data, checkpoints=[lk.CheckpointSaver(safe), None,
                                  lk.CheckpointSaver(old, format="pickle")],
               scheduler=local_scheduler)
    assert zipfile.is_zipfile(safe) and not zipfile.is_zipfile(old)
    assert type(lk.CheckpointFlow.load(safe)) is lk.CheckpointFlow
    with pytest.raises(lk.InputError, match="pickle checkpoint"):
        lk.CheckpointFlow.load(old)
    np.testing.assert_array_equal(lk.CheckpointFlow.load(old, trusted=True).execute(X),
                                  flow.execute(X))
    with pytest.raises(lk.InputError, match="format must be one of"):
        lk.CheckpointSaver(safe, format="json")


def _files(folder) -> set:
    return set(os.listdir(folder))


def test_a_full_disk_names_the_path_and_node_and_keeps_the_last_checkpoint(local_scheduler):
    """On a real full disk (a tiny tmpfs): a StorageError naming the path (and, while
    training, the node); the previous checkpoint loads as it was; no temp file stays."""
    from tests.disk import fill, tiny_disk
    chunks = [np.random.default_rng(k).normal(size=(30, 5)) for k in range(4)]
    with tiny_disk() as folder:
        path = os.path.join(folder, "flow.lk")
        flow = lk.Flow([lk.nodes.PCA(output_dim=3)])
        flow.train([chunks])
        flow.save(path)
        before = open(path, "rb").read()
        filler = fill(folder)
        with pytest.raises(lk.StorageError) as info:
            lk.Flow([lk.nodes.PCA(output_dim=2), lk.nodes.PCA(output_dim=1)]).save(path)
        assert isinstance(info.value, OSError) and info.value.errno == errno.ENOSPC
        assert info.value.where["path"] == path and "ENOSPC" in str(info.value)
        assert open(path, "rb").read() == before and _files(folder) == {"flow.lk", "filler"}
        np.testing.assert_allclose(lk.Flow.load(path).execute(chunks[0]),
                                   flow.execute(chunks[0]))
        os.unlink(filler)

        def fill_then_save(flow, i):
            fill(folder)
            lk.CheckpointSaver(path)(flow, i)
        training = lk.CheckpointFlow([lk.nodes.PCA(output_dim=4), lk.nodes.PCA(output_dim=2)])
        with pytest.raises(lk.StorageError) as info:
            training.train([chunks, chunks], checkpoints=[path, fill_then_save],
                           scheduler=local_scheduler)
        assert info.value.where["node"] == 1 and info.value.where["path"] == path
        saved = lk.CheckpointFlow.load(path)   # node 0's checkpoint, intact
        assert not saved[0].is_training() and saved[1].is_training()
        assert _files(folder) == {"flow.lk", "filler"}


def test_a_flow_saved_with_save_resumes_as_a_checkpoint_flow(tmp_path, local_scheduler):
    """The README's recipe: flow.save(path), then CheckpointFlow.load(path).train(resume=True)."""
    chunks = [np.random.default_rng(k).normal(size=(30, 5)) for k in range(4)]
    flow = lk.ParallelFlow([lk.nodes.PCA(output_dim=4), lk.nodes.PCA(output_dim=2)])
    flow[0].train(chunks[0])
    flow[0].stop_training()
    flow.save(tmp_path / "flow.lk")
    loaded = lk.CheckpointFlow.load(tmp_path / "flow.lk")
    assert type(loaded) is lk.CheckpointFlow
    loaded.train([None, chunks], scheduler=local_scheduler, resume=True,
                 checkpoints=tmp_path / "flow.lk")
    assert not loaded[1].is_training()
    assert type(lk.ParallelFlow.load(tmp_path / "flow.lk")) is lk.CheckpointFlow
