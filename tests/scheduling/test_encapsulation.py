"""No module of ``labkit/scheduling/`` reads another's private attributes, checked on the source.

Each module is read with :mod:`ast`.  A module may use the private names
(``_x``) it defines itself (``self._x = ...``, a class attribute, a slot, a
module-level name): those are its own objects' insides.  It may not read a
private name that only another module defines (``batch._open`` from the
scheduler, ``from .base import _as_labkit_error``): that is another's inside,
and what made the scheduler one object spread over three files.  The check
knows names, not types: a module that defines ``_lock`` for itself could still
read another's ``_lock`` unseen, so modules keep such names few.
"""

from __future__ import annotations

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "labkit" / "scheduling"

# (module, attribute, why it is allowed): reads of other libraries' insides that have
# no public form, each named here so that a new one is a decision, not an accident.
ALLOWED = {
    ("offload", "_processes", "ProcessPoolExecutor has no public way to list its processes"),
    ("lifeline", "_exit", "os._exit is public: it ends the process without clean-up"),
}


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def own_names(tree: ast.AST) -> set[str]:
    """Private names a module defines: attributes it assigns, class and module names, slots."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets):
            names.update(c.value for c in ast.walk(node.value)
                         if isinstance(c, ast.Constant) and isinstance(c.value, str))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return {n for n in names if private(n)}


def foreign_reads(source: str, module: str) -> list[str]:
    """Every read of a private name that ``source`` does not define itself."""
    tree = ast.parse(source)
    own = own_names(tree)
    allowed = {attr for who, attr, _ in ALLOWED if who == module}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private(node.attr):
            base = node.value
            if isinstance(base, ast.Name) and base.id in ("self", "cls"):
                continue   # its own object (a subclass's or mixin's too)
            if isinstance(base, ast.Call) and getattr(base.func, "id", None) == "super":
                continue
            if node.attr not in own and node.attr not in allowed:
                found.append(f"{module}:{node.lineno} reads .{node.attr}")
        elif isinstance(node, ast.ImportFrom) and (node.level or "labkit" in (node.module or "")):
            found += [f"{module}:{node.lineno} imports {alias.name}" for alias in node.names
                      if private(alias.name)]
    return found


def violations(root: pathlib.Path = PACKAGE) -> list[str]:
    return [v for path in sorted(root.rglob("*.py"))
            for v in foreign_reads(path.read_text(), path.stem)]


def test_no_scheduling_module_reads_another_modules_private_attributes():
    assert violations() == []


def test_the_check_catches_what_it_is_for():
    planted = ("def f(batch, scheduler):\n"
               "    from .base import _as_labkit_error\n"
               "    return batch._open, scheduler._cond\n")
    assert foreign_reads(planted, "dask") == ["dask:2 imports _as_labkit_error",
                                             "dask:3 reads ._open", "dask:3 reads ._cond"]


def test_the_check_lets_a_module_use_its_own_insides():
    own = ("class Share:\n    __slots__ = ('_open',)\n"
           "class Window:\n    def n(self, share):\n        self._x = 1\n"
           "        return len(share._open) + self._x + super()._y\n")
    assert foreign_reads(own, "window") == []
