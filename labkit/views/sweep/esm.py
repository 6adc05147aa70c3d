"""The front-end's ES modules joined into one text, for an anywidget's ``_esm``.

The sweep board's front-end is plain ES modules, no build step:
``assets/sweep_board.js`` imports the modules of ``assets/sweep_board/``, one
concern each (the frames' state, the table, the curves, the parallel
coordinates...).  Two pages run it:

- a page served over HTTP (``tests/views/sweep_page.html``) imports
  ``sweep_board.js`` by URL, and the browser loads the modules it imports;
- anywidget's ``_esm`` is one text, which JupyterLab runs from a ``blob:`` URL,
  where a relative import has nothing to resolve against (and anywidget
  serves no folder).  So the widget gets :func:`bundle`: the modules joined
  into one module, here, when the widget class is made.

The join works by a rule the modules keep (:func:`joined` checks it, and
raises :class:`ModuleRuleError` naming the file and line where one does not):

1. An import is one line, ``import { a, b } from "./x.js";``: named, relative,
   not renamed; the imported module exports each name.
2. ``export`` stands only before a top-level ``function``, ``const``, ``let``
   or ``class``; ``export default`` only in the entry.  No other line starts
   with ``import`` or ``export``.
3. Top-level names are unique across the modules joined (joined, they share
   one scope), and no module imports itself through others (no circle).

The joined text is each module in dependency order (every module after the
ones it imports; depth-first from the entry, in the order of its imports),
its import lines dropped and the ``export`` of its declarations dropped, under
a ``// -- <path>`` line; the entry last, with its ``export default``.  Every
other line is kept as it is, so the code the widget runs is the code the page
loads (``tests/views/test_board_modules.py`` checks both draw the same board).
"""

from __future__ import annotations

import functools
import posixpath
import re
from dataclasses import dataclass
from importlib.resources import files
from importlib.resources.abc import Traversable

from ...errors import LabkitError

__all__ = ["Module", "ModuleRuleError", "asset", "bundle", "joined", "module_order"]

_IMPORT = re.compile(r'^import \{ ?(\w+(?:, ?\w+)*) ?\} from "(\.\.?/[\w./-]+\.js)";$')
_EXPORT = re.compile(r"^export (?=(?:function|const|let|class) )")
_DECLARED = re.compile(r"^(?:export )?(?:function|const|let|class) (\w+)")
_EXPORTED = re.compile(r"^export (?:function|const|let|class) (\w+)")
_DEFAULT = "export default "


class ModuleRuleError(LabkitError):
    """A front-end module breaks the rule the join relies on (``labkit.views.sweep.esm``)."""


@dataclass(frozen=True)
class Module:
    """One module as the join reads it: its path, imports and lines."""

    path: str  # relative to the assets folder, "/"-separated
    imports: tuple[tuple[str, tuple[str, ...]], ...]  # (path, names), in the file's order
    lines: tuple[str, ...]


def asset(name: str) -> str:
    """The text of a front-end file shipped in ``labkit/views/assets/``."""
    return (files("labkit.views") / "assets" / name).read_text(encoding="utf-8")


def _read(root: Traversable, path: str, entry: bool) -> Module:
    """``path`` read and checked line by line against the rule."""
    lines = root.joinpath(*path.split("/")).read_text(encoding="utf-8").splitlines()
    imports = []
    for number, line in enumerate(lines, 1):
        found = _IMPORT.match(line)
        if found:
            target = posixpath.normpath(posixpath.join(posixpath.dirname(path), found[2]))
            imports.append((target, tuple(n.strip() for n in found[1].split(","))))
        elif _breaks_rule(line, entry):
            raise ModuleRuleError(
                f"{line!r} breaks the modules' rule (see labkit.views.sweep.esm)",
                module=path,
                line=number,
            )
    return Module(path, tuple(imports), tuple(lines))


def _breaks_rule(line: str, entry: bool) -> bool:
    """A line that starts with import or export, yet is no import or export the join knows."""
    if not line.startswith(("import", "export")) or _EXPORT.match(line):
        return False
    return not (entry and line.startswith(_DEFAULT))


def module_order(root: Traversable, entry: str) -> list[Module]:
    """``entry`` and every module it imports, each after the ones it imports."""
    done: dict[str, Module] = {}

    def visit(path: str, chain: tuple[str, ...]) -> None:
        if path in chain:
            raise ModuleRuleError(f"modules import each other: {' -> '.join(chain + (path,))}")
        if path in done:
            return
        module = _read(root, path, entry=path == entry)
        for target, _names in module.imports:
            visit(target, chain + (path,))
        done[path] = module

    visit(entry, ())
    _check_names(done)
    return list(done.values())


def _check_names(modules: dict[str, Module]) -> None:
    """Each imported name exported by its module; each top-level name declared once."""
    owner: dict[str, str] = {}
    for module in modules.values():
        for line in module.lines:
            found = _DECLARED.match(line)
            if found and owner.setdefault(found[1], module.path) != module.path:
                raise ModuleRuleError(
                    f"{found[1]!r} is declared in {owner[found[1]]} too", module=module.path
                )
    for module in modules.values():
        for target, names in module.imports:
            exported = {m[1] for line in modules[target].lines if (m := _EXPORTED.match(line))}
            missing = sorted(set(names) - exported)
            if missing:
                raise ModuleRuleError(
                    f"imports {missing[0]!r}, not exported by {target}", module=module.path
                )


def joined(root: Traversable, entry: str) -> str:
    """``entry`` (a path under ``root``) and its modules as one module's text."""
    out = [f"// {entry} and its modules, joined by labkit.views.sweep.esm: edit the modules."]
    for module in module_order(root, entry):
        out.append(f"// -- {module.path}")
        out.extend(_EXPORT.sub("", line) for line in module.lines if not _IMPORT.match(line))
    return "\n".join(out) + "\n"


@functools.cache
def bundle(entry: str) -> str:
    """The front-end module ``entry`` of ``labkit/views/assets/``, joined with its imports."""
    return joined(files("labkit.views") / "assets", entry)
