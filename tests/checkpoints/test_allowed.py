"""The allow-list: packages declare their library classes; nothing else loads unless allowed."""

import io

import numpy as np
import pytest

import labkit as lk
from labkit import checkpoints
from labkit.checkpoints import allowed


class Mine:
    """A user's class: it loads only when allowed."""

    def __init__(self, value=1):
        self.value = value


class Tool:
    """A class beside Mine in the same module, not a subclass of it."""


def _round_trip(obj, **options):
    buffer = io.BytesIO()
    checkpoints.write_snapshot(obj, buffer)
    return checkpoints.read_snapshot(io.BytesIO(buffer.getvalue()), "<memory>", **options)


def test_labkit_declares_its_nodes_and_flows_as_library_classes():
    modules = checkpoints.library_modules()
    assert {"labkit.flows", "labkit.nodes", "torch.nn.modules", "torch.optim"} <= set(modules)
    node = _round_trip(lk.nodes.PCA(output_dim=2))
    assert type(node) is lk.nodes.PCA and node.output_dim == 2
    flow = _round_trip(lk.Flow([lk.nodes.SFA()]))
    assert type(flow) is lk.Flow and type(flow[0]) is lk.nodes.SFA


def test_a_flows_class_outside_the_declared_bases_is_refused(tmp_path):
    saver = lk.CheckpointSaver(tmp_path / "x.lk")
    with pytest.raises(lk.InputError, match=r"CheckpointSaver.*allow"):
        _round_trip(saver)


def test_a_declared_library_loads_without_allowing_and_its_bases_are_checked(monkeypatch):
    monkeypatch.setattr(allowed, "_LIBRARY", dict(allowed._LIBRARY))
    with pytest.raises(lk.InputError, match=r"Mine.*allow_in_checkpoints\(Mine\)"):
        _round_trip(Mine(3))
    assert _round_trip(Mine(3), allow=[Mine]).value == 3
    checkpoints.allow_library(__name__, Mine)
    assert __name__ in checkpoints.library_modules()
    assert _round_trip(Mine(4)).value == 4
    with pytest.raises(lk.InputError, match=r"Tool.*allow"):
        _round_trip(Tool())  # under the prefix, but not a subclass of the declared base
    checkpoints.allow_library(__name__)
    assert type(_round_trip(Tool())) is Tool  # no bases: any class of the module


def test_functions_are_never_library_objects(monkeypatch):
    monkeypatch.setattr(allowed, "_LIBRARY", dict(allowed._LIBRARY))
    checkpoints.allow_library(__name__)
    with pytest.raises(lk.InputError, match=r"_round_trip.*allow"):
        _round_trip({"f": _round_trip})
    assert _round_trip({"f": _round_trip}, allow=[_round_trip])["f"] is _round_trip


def test_the_format_round_trips_plain_values_without_flows():
    value = {"a": (1, 2.5, None), "b": {1, 2}, "c": b"\x00\x01", "d": 1 + 2j,
             "e": np.arange(4.0), "f": np.float32(1.5), "g": np.dtype("int16")}
    back = _round_trip(value)
    assert back["a"] == (1, 2.5, None) and back["b"] == {1, 2} and back["c"] == b"\x00\x01"
    assert back["d"] == 1 + 2j and back["e"].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert back["f"] == np.float32(1.5) and type(back["f"]) is np.float32
    assert back["g"] == np.dtype("int16")

