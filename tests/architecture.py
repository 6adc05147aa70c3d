"""Measures of labkit's shape, read from the source: circles, sizes and reaches.

Used by ``tests/test_architecture.py`` (the limits) and runnable as a script
(``python tests/architecture.py``) to print every finding.

>>> sorted(circles({"a.x": {"a.y"}, "a.y": {"a.x"}, "a.z": {"a.x"}}))
[['a.x', 'a.y']]
"""

from __future__ import annotations

import ast
import pathlib
import sys

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "labkit"

MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 60
MAX_PRIVATE_REACHES = 40
MAX_FOLDER_MODULES = 16


def module_name(path: pathlib.Path, root: pathlib.Path = PACKAGE) -> str:
    """``labkit/flows/parallel.py`` -> ``labkit.flows.parallel``."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(root: pathlib.Path = PACKAGE) -> dict[str, pathlib.Path]:
    """Every module of the package by its dotted name."""
    return {module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def imported(source: str, module: str, is_package: bool) -> set[str]:
    """Absolute names of every module ``source`` imports (and names it imports from them)."""
    package = module if is_package else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def imports_of(path: pathlib.Path, module: str, known: set[str]) -> set[str]:
    """The package's own modules that ``path`` imports, lazy imports included."""
    found = imported(path.read_text(), module, path.name == "__init__.py")
    return {name for name in found if name in known and name != module}


def graph(root: pathlib.Path = PACKAGE) -> dict[str, set[str]]:
    """Each module -> the modules of its own package (not subpackages' ``__init__``) it imports."""
    mods = modules(root)
    known = set(mods)
    edges: dict[str, set[str]] = {}
    for name, path in mods.items():
        parent = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges[name] = (
            {
                other
                for other in imports_of(path, name, known)
                if other.rpartition(".")[0] == parent and other != parent
            }
            if path.name != "__init__.py"
            else set()
        )
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    sys.setrecursionlimit(10_000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def long_modules(root: pathlib.Path = PACKAGE) -> dict[str, int]:
    """Modules over the line limit, with their line counts."""
    counts = {n: len(p.read_text().splitlines()) for n, p in modules(root).items()}
    return {n: c for n, c in counts.items() if c > MAX_MODULE_LINES}


def crowded_folders(root: pathlib.Path = PACKAGE) -> dict[str, int]:
    """Folders holding more than the limit of modules (``__init__`` counts), with their counts."""
    counts = {
        module_name(folder / "__init__.py", root): len(list(folder.glob("*.py")))
        for folder in [root, *sorted(p.parent for p in root.rglob("*/__init__.py"))]
    }
    return {n: c for n, c in counts.items() if c > MAX_FOLDER_MODULES}


def long_functions(root: pathlib.Path = PACKAGE) -> dict[str, int]:
    """Functions over the line limit (decorators to last line), with their lengths."""
    found = {}
    for name, path in modules(root).items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                if length > MAX_FUNCTION_LINES:
                    found[f"{name}:{node.lineno} {node.name}"] = length
    return found


def private_reaches(root: pathlib.Path = PACKAGE) -> list[str]:
    """Each ``x._name`` where ``x`` is not ``self``, ``cls`` or ``super()`` (dunders aside)."""
    found = []
    for name, path in modules(root).items():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Attribute):
                continue
            attr = node.attr
            if not attr.startswith("_") or attr.startswith("__"):
                continue
            if attr.endswith("_"):  # a protocol's name, as IPython's _repr_mimebundle_
                continue
            if _is_self(node.value):
                continue
            found.append(f"{name}:{node.lineno} {ast.unparse(node)}")
    return found


def _is_self(value: ast.expr) -> bool:
    """``self``, ``cls``, ``super()``, ``type(self)``, or a documented ``os``/``sys`` name."""
    if isinstance(value, ast.Name):
        return value.id in ("self", "cls", "os", "sys")
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
        if value.func.id == "super":
            return True
        if value.func.id == "type" and len(value.args) == 1:
            return _is_self(value.args[0])
    return False


def names_built(root: pathlib.Path = PACKAGE) -> list[str]:
    """Each ``getattr``/``hasattr`` of a name built at run time (``"_on_" + type(e).__name__``,
    ``f"_on_{kind}"``): a handler found so can be tied to its event by neither grep nor mypy."""
    found = []
    for name, path in modules(root).items():
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr")
                and len(node.args) >= 2
                and _is_built(node.args[1])
            ):
                found.append(f"{name}:{node.lineno} {ast.unparse(node)}")
    return found


def _is_built(name: ast.expr) -> bool:
    """An f-string, a ``+`` or ``%`` on a string, or a ``.format()``/``.join()``."""
    if isinstance(name, ast.JoinedStr):
        return True
    if isinstance(name, ast.BinOp) and isinstance(name.op, (ast.Add, ast.Mod)):
        return any(
            (isinstance(side, ast.Constant) and isinstance(side.value, str)) or _is_built(side)
            for side in (name.left, name.right)
        )
    return isinstance(name, ast.Call) and (
        isinstance(name.func, ast.Attribute) and name.func.attr in ("format", "join")
    )


def main() -> int:
    """Print every finding; the exit status is the number of kinds of finding."""
    kinds = 0
    for title, items in [
        ("import circles", [" <-> ".join(c) for c in circles(graph())]),
        ("long modules", [f"{n} {c}" for n, c in long_modules().items()]),
        ("long functions", [f"{n} {c}" for n, c in long_functions().items()]),
        ("names built to look up", names_built()),
        ("crowded folders", [f"{n} {c}" for n, c in crowded_folders().items()]),
    ]:
        print(f"{title}: {len(items)}")
        print("".join(f"  {i}\n" for i in items), end="")
        kinds += bool(items)
    reaches = [r for r in private_reaches() if r.startswith(tuple(sys.argv[1:]) or "")]
    print(f"private reaches: {len(reaches)} (limit {MAX_PRIVATE_REACHES})")
    if len(sys.argv) > 1:
        print("".join(f"  {r}\n" for r in reaches), end="")
    kinds += len(reaches) > MAX_PRIVATE_REACHES
    return kinds


if __name__ == "__main__":
    sys.exit(main())
