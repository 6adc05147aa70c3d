"""Safe checkpoints: round trips, the allow-list, pickle only when trusted, damage, temp files."""

import functools
import json
import os
import pathlib
import pickle
import sys
import zipfile

import numpy as np
import pytest
import torch

import labkit as lk
from labkit.checkpoints import allowed
from tests import helpers
from tests.flows.cases import CASES, X, chunks, input_for


class TinyNet(torch.nn.Module):
    """A user's module class: checkpoints recreate it only when allowed."""

    def __init__(self, n_in=3):
        super().__init__()
        self.hidden = torch.nn.Linear(n_in, 4)
        self.out = torch.nn.Linear(4, 1)
        self.register_buffer("scale", torch.full((1,), 2.0, dtype=torch.float64))
        self.note = {"kind": "tiny", "sizes": (n_in, 4)}

    def forward(self, x):
        return self.out(torch.tanh(self.hidden(x))) * self.scale


class Touch:
    """Unpickling this creates ``marker``: what a crafted pickle checkpoint would do."""

    def __init__(self, marker):
        self.marker = pathlib.Path(marker)

    def __reduce__(self):
        return (pathlib.Path.touch, (self.marker,))


def _first_chunk(data):
    """``(x, *args)`` of a case's first chunk."""
    return data[0] if isinstance(data[0], tuple) else (data[0],)


def _torch_flow(module, factory=None):
    net = lk.nodes.TorchNode(module.double(), torch.nn.MSELoss(),
                             factory or functools.partial(torch.optim.SGD, lr=0.05),
                             epochs=3, batch_size=16, shuffle=True)
    return lk.Flow([lk.nodes.PCA(output_dim=3), net])


def _torch_data():
    y = X[:, :1] - X[:, 1:2]
    return [chunks(X), chunks(X, y)]


def _temps(folder):
    return sorted(n for n in os.listdir(folder) if n.startswith(".labkit-"))


@pytest.mark.parametrize("name", sorted(CASES))
def test_builtin_nodes_round_trip_trained_and_mid_training(tmp_path, name):
    make, data = CASES[name]
    path = tmp_path / "flow.lk"
    trained = lk.Flow([make()])
    trained.train([data])
    trained.save(path)
    back = lk.Flow.load(path)
    assert all(a.flags.writeable for a in vars(back[0]).values() if isinstance(a, np.ndarray))
    helpers.assert_nodes_equal(trained[0], back[0], rtol=0)
    np.testing.assert_array_equal(back.execute(input_for(name)), trained.execute(input_for(name)))
    # Mid-phase statistics survive: the loaded node finishes training like the original.
    half = make()
    half.train(*_first_chunk(data))
    lk.Flow([half]).save(path)
    again = lk.Flow.load(path)[0]
    for node in (half, again):
        for chunk in data[1:]:
            node.train(*(chunk if isinstance(chunk, tuple) else (chunk,)))
        while node.is_training():
            node.stop_training()
            if node.is_training():
                for chunk in data:
                    node.train(*(chunk if isinstance(chunk, tuple) else (chunk,)))
    helpers.assert_nodes_equal(half, again, rtol=0)
    assert zipfile.is_zipfile(path)  # the safe format, not pickle


def test_torch_node_round_trips_mid_training_and_keeps_training(tmp_path):
    path = tmp_path / "flow.lk"
    flow = _torch_flow(torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(),
                                           torch.nn.Linear(8, 1)))
    data = _torch_data()
    flow[0].train(X)
    flow[0].stop_training()
    net = flow[1]
    for x, y in data[1]:
        net.train(flow[0].execute(x), y)
    net.stop_training()  # one of three epochs done
    flow.save(path)
    with zipfile.ZipFile(path) as zf:
        assert "tensors.pt" in zf.namelist()
    back = lk.Flow.load(path)
    loaded = back[1]
    assert loaded.phase == 1 and loaded.losses == net.losses
    assert isinstance(loaded.module[0].weight, torch.nn.Parameter)
    assert loaded.module[0].weight.requires_grad and loaded.module[0].weight.dtype == torch.float64
    assert loaded.optimizer_factory.func is torch.optim.SGD
    assert loaded.optimizer_factory.keywords == {"lr": 0.05}
    flow.train(data, resume=True)
    back.train(data, resume=True)
    np.testing.assert_array_equal(back.execute(X), flow.execute(X))


def test_user_module_class_needs_allowing(tmp_path, monkeypatch):
    path = tmp_path / "flow.lk"
    flow = _torch_flow(TinyNet())
    flow.train(_torch_data())
    flow.save(path)
    with pytest.raises(lk.InputError, match=r"TinyNet.*allow=\[TinyNet\]") as info:
        lk.Flow.load(path)
    assert "flow.nodes[1].module" in str(info.value) and info.value.where["path"] == str(path)
    back = lk.Flow.load(path, allow=[TinyNet])
    assert type(lk.Flow.load(path, trusted=True)[1].module) is TinyNet  # trusted: any class
    assert type(back[1].module) is TinyNet and back[1].module.note["sizes"] == (3, 4)
    assert "scale" in dict(back[1].module.named_buffers())
    np.testing.assert_array_equal(back.execute(X), flow.execute(X))
    monkeypatch.setattr(allowed, "_REGISTERED", {})
    allowed.allow_in_checkpoints(TinyNet)
    np.testing.assert_array_equal(lk.Flow.load(path).execute(X), flow.execute(X))


def test_tied_weights_stay_tied(tmp_path):
    first, second = torch.nn.Linear(3, 3), torch.nn.Linear(3, 3)
    second.weight = first.weight
    path = tmp_path / "flow.lk"
    tied = torch.nn.Sequential(first, torch.nn.Tanh(), second, torch.nn.Linear(3, 1))
    _torch_flow(tied).save(path)
    module = lk.Flow.load(path)[1].module
    assert module[0].weight is module[2].weight


def test_values_the_format_cannot_store_fail_before_writing(tmp_path):
    path = tmp_path / "flow.lk"
    flow = _torch_flow(torch.nn.Linear(3, 1), factory=lambda p: torch.optim.SGD(p, lr=0.1))
    lk.Flow([lk.nodes.PCA()]).save(path)
    before = path.read_bytes()
    with pytest.raises(lk.InputError, match="optimizer_factory is a lambda.*partial") as info:
        flow.save(path)
    assert isinstance(info.value, TypeError)  # as pickle raises for what it cannot store
    assert path.read_bytes() == before and _temps(tmp_path) == []
    flow[1].optimizer_factory = functools.partial(torch.optim.SGD, lr=0.1)
    flow.save(path)  # fixed, the same flow saves
    assert isinstance(lk.Flow.load(path)[1], lk.nodes.TorchNode)


def test_crafted_pickle_is_refused_without_running_it(tmp_path):
    marker = tmp_path / "ran"
    path = tmp_path / "flow.pkl"
    path.write_bytes(pickle.dumps(Touch(marker)))
    for load in (lk.Flow.load, lk.CheckpointFlow.load):
        with pytest.raises(lk.InputError, match="pickle checkpoint.*trusted=True"):
            load(path)
    assert not marker.exists()
    # The opt-in really unpickles (so the refusal above is what kept the code from running).
    with pytest.raises(lk.InputError, match="not a labkit Flow"):
        lk.Flow.load(path, trusted=True)
    assert marker.exists()


def test_old_pickle_checkpoints_load_when_trusted(tmp_path):
    path = tmp_path / "flow.pkl"
    flow = lk.Flow([lk.nodes.PCA(output_dim=2)])
    flow.train([chunks(X)])
    flow.save(path, format="pickle")
    with pytest.raises(lk.InputError, match="pickle"):
        lk.Flow.load(path)
    np.testing.assert_array_equal(lk.Flow.load(path, trusted=True).execute(X), flow.execute(X))
    with pytest.raises(lk.InputError, match="format must be one of safe, pickle"):
        flow.save(path, format="json")


def _crafted(tmp_path, root):
    """A safe-format file whose flow data is ``root``."""
    path = tmp_path / "crafted.lk"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("meta.json", json.dumps({"format": "labkit-snapshot", "version": 1,
                                             "root": root, "arrays": 0}))
    return path


def test_names_outside_the_allow_list_are_neither_imported_nor_called(tmp_path):
    assert "this" not in sys.modules  # importing it prints; a load must not import it
    for module, qualname in [("this", "Anything"), ("os", "system"),
                             ("labkit.checkpoints.format", "os.system"),  # imported there, not defined
                             # labkit code that writes files or runs commands when called:
                             ("labkit.flows.checkpoint", "CheckpointSaver"),
                             ("labkit.program.element", "Element.run"),
                             ("torch.nn.modules.module", "register_module_forward_hook")]:
        ref = {"module": module, "qualname": qualname}
        for root in ({"$": "object", "id": 0, "class": ref, "state": None},
                     {"$": "ref", **ref}):
            with pytest.raises(lk.InputError, match=f"{module}.{qualname}.*allow"):
                lk.Flow.load(_crafted(tmp_path, root))
    assert "this" not in sys.modules
    with pytest.raises(lk.InputError, match="allow takes a list of classes"):
        lk.Flow.load(_crafted(tmp_path, None), allow=[42])
    with pytest.raises(lk.InputError, match="holds a NoneType, not a labkit Flow"):
        lk.Flow.load(_crafted(tmp_path, None))


def test_damaged_checkpoints_are_input_errors_naming_the_path(tmp_path):
    good = tmp_path / "good.lk"
    flow = lk.Flow([lk.nodes.PCA(output_dim=2)])
    flow.train([chunks(X)])
    flow.save(good)
    data = good.read_bytes()
    flow.save(tmp_path / "old.pkl", format="pickle")
    pickled = (tmp_path / "old.pkl").read_bytes()
    flipped = bytearray(data)
    start = data.index(b"\x93NUMPY") + 200  # inside an array's data: the zip's CRC catches it
    flipped[start:start + 8] = bytes(8)
    cases = {"half.lk": data[: len(data) // 2], "tail.lk": data[:-5], "head.lk": data[:3],
             "flipped.lk": bytes(flipped), "empty.lk": b"", "noise.lk": b"\x13" * 100,
             "tag.lk": _crafted(tmp_path, {"$": "no such tag"}).read_bytes(),
             "half.pkl": pickled[: len(pickled) // 2]}
    for name, content in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.raises(lk.InputError) as info:
            lk.Flow.load(path, trusted=name.endswith(".pkl"))
        assert info.value.where["path"] == str(path), name
        assert str(path) in str(info.value)
    with pytest.raises(lk.InputError, match="does not exist"):
        lk.Flow.load(tmp_path / "missing.lk")
    np.testing.assert_array_equal(lk.Flow.load(good).execute(X), flow.execute(X))
