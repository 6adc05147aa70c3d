"""The rules between labkit's parts, checked on the source: the engine never imports a view.

Every ``import`` in the package is read with :mod:`ast`, those inside
functions included (a lazy import is still an import), and resolved to an
absolute module name.  Each rule names a part and the parts it must not
import.
"""

from __future__ import annotations

import pathlib

import pytest

from tests.architecture import imported, module_name

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "labkit"

ENGINE = ["labkit.checkpoints", "labkit.scheduling", "labkit.flows", "labkit.nodes", "labkit.data_parallel",
          "labkit.pipeline", "labkit.program", "labkit.ensemble", "labkit.experiments",
          "labkit.runs", "labkit.events", "labkit.errors"]
GROUND_FLOOR = ["labkit.errors", "labkit.events", "labkit.event_bus", "labkit.runs"]

# (who, what it must not import, why)
RULES = [
    *[(part, "labkit.views", "the engine never imports a view") for part in ENGINE],
    ("labkit.scheduling", "labkit.flows", "schedulers know tasks, not flows"),
    ("labkit.views", "labkit.flows", "views know runs and events, not flows"),
    ("labkit.flows", "labkit.nodes", "nodes build on the flows' node contract, not the reverse"),
    *[(room, other, "flows and nodes know chunks and schedulers, not trials or replicas")
      for room in ["labkit.flows", "labkit.nodes"]
      for other in ["labkit.experiments", "labkit.data_parallel"]],
    ("labkit.nodes", "labkit.scheduling", "a node knows chunks, not where they run"),
    *[("labkit.checkpoints", other, "checkpoints are a ground floor: others declare their classes")
      for other in ["labkit.flows", "labkit.nodes", "labkit.experiments", "labkit.data_parallel",
                    "labkit.views", "labkit.scheduling", "labkit.pipeline", "labkit.program",
                    "labkit.ensemble", "labkit.runs", "labkit.events"]],
    *[(part, other, "the ground floor imports only itself")
      for part in GROUND_FLOOR
      for other in ["labkit.scheduling", "labkit.flows", "labkit.nodes", "labkit.data_parallel",
                    "labkit.pipeline", "labkit.program", "labkit.ensemble", "labkit.views"]],
]


def within(name: str, part: str) -> bool:
    return name == part or name.startswith(part + ".")


def violations(root: pathlib.Path = PACKAGE) -> list[str]:
    """Every import that breaks a rule, in the package at ``root``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        module = module_name(path, root)
        names = imported(path.read_text(), module, path.name == "__init__.py")
        for who, banned, why in RULES:
            if within(module, who):
                found += [f"{module} imports {n} ({why})" for n in sorted(names)
                          if within(n, banned)]
    return found


def test_the_engine_never_imports_a_view_and_the_parts_keep_their_places():
    assert violations() == []


def test_every_engine_part_exists():
    """A rule about a part that was renamed away would pass silently."""
    for part in ENGINE + ["labkit.views"]:
        path = PACKAGE.parent.joinpath(*part.split("."))
        assert path.is_dir() or path.with_suffix(".py").is_file(), part


@pytest.mark.parametrize("source, module, is_package, expected", [
    ("from ..views.runner import Runner", "labkit.program.driver", False, "labkit.views.runner"),
    ("def widget():\n    from .. import views", "labkit.flows.flow", False, "labkit.views"),
    ("import labkit.views.notebook.board", "labkit.scheduling.base", False, "labkit.views.notebook.board"),
    ("from .parallel import ParallelFlow", "labkit.flows", True, "labkit.flows.parallel"),
])
def test_the_checker_resolves_relative_and_lazy_imports(source, module, is_package, expected):
    assert expected in imported(source, module, is_package)


def test_the_checker_catches_a_planted_violation(tmp_path):
    """A copy of the package with a view imported lazily in a scheduler fails the rule."""
    import shutil
    copy = tmp_path / "labkit"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    bad = copy / "scheduling" / "tasks" / "base.py"
    bad.write_text(bad.read_text() + "\n\ndef _peek():\n    from ...views.notebook import board\n")
    assert violations(copy) == [
        "labkit.scheduling.tasks.base imports labkit.views.notebook (the engine never imports a view)",
        "labkit.scheduling.tasks.base imports labkit.views.notebook.board (the engine never imports a view)"]


def test_checkpoints_may_not_learn_about_flows_by_an_import(tmp_path):
    """The import circle closed by a lazy ``from .flow import Flow`` is caught in checkpoints."""
    import shutil
    copy = tmp_path / "labkit"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    bad = copy / "checkpoints" / "allowed.py"
    bad.write_text(bad.read_text() + "\n\ndef _flow():\n    from ..flows.flow import Flow\n")
    assert violations(copy) == [
        "labkit.checkpoints.allowed imports labkit.flows.flow "
        "(checkpoints are a ground floor: others declare their classes)",
        "labkit.checkpoints.allowed imports labkit.flows.flow.Flow "
        "(checkpoints are a ground floor: others declare their classes)"]
