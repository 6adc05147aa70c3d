"""The rooms of data_parallel import only what their docstrings allow (read from the source)."""

from __future__ import annotations

import pathlib

import pytest

from tests.test_layering import imported, module_name, within

ROOM = pathlib.Path(__file__).resolve().parents[2] / "labkit" / "data_parallel"
PACKAGE = ROOM.parent

# (room, what it must not import, why)
RULES = [
    ("labkit.data_parallel.worker", "labkit.data_parallel.dask", "a worker never runs client code"),
    ("labkit.data_parallel.worker", "labkit.data_parallel.local", "a worker has no thread replicas"),
    ("labkit.data_parallel.local", "labkit.data_parallel.dask", "threads need no Dask group"),
    ("labkit.data_parallel.local", "labkit.data_parallel.worker", "threads need no rank"),
    ("labkit.data_parallel.dask", "labkit.data_parallel.local", "the Dask group has no threads"),
]


def _modules(room: str) -> dict[str, set[str]]:
    """Every module of ``room`` and the modules it imports."""
    found = {}
    for path in (ROOM / room.rsplit(".", 1)[1]).rglob("*.py"):
        name = module_name(path, PACKAGE)
        found[name] = imported(path.read_text(), name, path.name == "__init__.py")
    return found


@pytest.mark.parametrize(("room", "banned", "why"), RULES)
def test_a_room_imports_only_what_it_may(room, banned, why):
    modules = _modules(room)
    assert modules, f"no modules found in {room}"
    bad = {m: sorted(n for n in names if within(n, banned)) for m, names in modules.items()}
    assert not any(bad.values()), f"{why}: {bad}"


def test_every_room_says_what_it_is_for_and_what_it_may_import():
    for room in ("local", "dask", "worker"):
        doc = (ROOM / room / "__init__.py").read_text()
        assert doc.startswith('"""') and "May import" in doc, room
