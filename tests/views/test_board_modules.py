"""The sweep board's front-end as ES modules, and the one text the widget runs (issue 45).

``assets/sweep_board.js`` imports the modules of ``assets/sweep_board/``; a page
served over HTTP imports them by URL, while the anywidget gets them joined into one
text (:func:`labkit.views.sweep.esm.bundle`: JupyterLab runs ``_esm`` from a ``blob:`` URL,
where relative imports do not resolve).  Here: each file is a real ES module (Node
imports and links it, and its exports are the ones it declares), each is small, the
join keeps the rule it relies on, and the joined text, run from a blob as JupyterLab
runs it, draws in Chromium exactly the board the modules draw from the same frames.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import subprocess
from fnmatch import fnmatch
from pathlib import Path

import pytest
import tomllib

from labkit.views.sweep.esm import ModuleRuleError, bundle, joined
from labkit.views.sweep.widget import SweepBoardWidget
from tests.browser import chromium
from tests.conftest import ROOT
from tests.views.sweep_page_harness import Board, Sweep, served_harness

ASSETS = Path(ROOT) / "labkit" / "views" / "assets"
MODULES = sorted((ASSETS / "sweep_board").glob("*.js"))
FILES = [ASSETS / "sweep_board.js", *MODULES]
EXPORTED = re.compile(r"^export (?:function|const|let|class) (\w+)", re.M)
IMPORT = re.compile(r"^import .*$", re.M)

_NODE_IMPORTS = """
const out = {};
for (const url of JSON.parse(process.argv[1])) {
  const m = await import(url);
  out[url] = Object.keys(m).sort();
}
console.log(JSON.stringify(out));
"""


def _node(script: str, *args: str) -> str:
    """``script`` run by Node as an ES module; its stdout."""
    out = subprocess.run(["node", "--input-type=module", "-e", script, *args],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_the_board_is_a_small_entry_and_modules_each_under_250_lines():
    assert len(MODULES) >= 8
    sizes = {p.name: len(p.read_text().splitlines()) for p in FILES}
    assert max(sizes.values()) <= 250, sizes
    assert "sweep_board.js" in bundle("sweep_board.js").splitlines()[0]


@pytest.mark.needs("node")
def test_node_imports_each_module_and_it_exports_what_it_declares():
    urls = [p.as_uri() for p in FILES]
    found = json.loads(_node(_NODE_IMPORTS, json.dumps(urls)))
    for path in FILES:
        declared = sorted(EXPORTED.findall(path.read_text()))
        if path.name == "sweep_board.js":
            declared = ["default"]
        assert found[path.as_uri()] == declared, path.name


@pytest.mark.needs("node")
def test_the_joined_text_is_one_module_with_the_entrys_default_export():
    text = bundle("sweep_board.js")
    assert not IMPORT.findall(text)
    assert [line for line in text.splitlines() if line.startswith("export")] == [
        "export default { render };"]
    url = "data:text/javascript;base64," + base64.b64encode(text.encode()).decode()
    script = ("const m = await import(process.argv[1]);"
              "console.log(JSON.stringify([Object.keys(m), Object.keys(m.default),"
              " typeof m.default.render]));")
    assert json.loads(_node(script, url)) == [["default"], ["render"], "function"]


def test_the_joined_text_holds_every_modules_lines_as_written():
    text = bundle("sweep_board.js")
    for path in FILES:
        kept = [re.sub(r"^export (?=(function|const|let|class) )", "", line)
                for line in path.read_text().splitlines() if not line.startswith("import ")]
        rel = path.relative_to(ASSETS).as_posix()
        assert f"// -- {rel}\n" + "\n".join(kept) + "\n" in text + "\n", rel
    assert SweepBoardWidget._esm == text


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, body in files.items():
        (root / name).write_text(body)
    return root


@pytest.mark.parametrize("files, words", [
    ({"entry.js": 'import { a as b } from "./m.js";\n', "m.js": "export const a = 1;\n"},
     "breaks the modules' rule"),
    ({"entry.js": 'import {\n  a } from "./m.js";\n', "m.js": "export const a = 1;\n"},
     "breaks the modules' rule"),
    ({"entry.js": 'import { a } from "./m.js";\n', "m.js": "const a = 1;\nexport { a };\n"},
     "breaks the modules' rule"),
    ({"entry.js": 'import { b } from "./m.js";\n', "m.js": "export const a = 1;\n"},
     "imports 'b', not exported by m.js"),
    ({"entry.js": 'import { a } from "./m.js";\nfunction a() {}\n',
      "m.js": "export const a = 1;\n"}, "'a' is declared in"),
    ({"entry.js": 'import { a } from "./m.js";\n',
      "m.js": 'import { b } from "./n.js";\nexport const a = 1;\n',
      "n.js": 'import { a } from "./m.js";\nexport const b = 1;\n'},
     "modules import each other: entry.js -> m.js -> n.js -> m.js"),
    ({"entry.js": 'import { a } from "./m.js";\n', "m.js": "export default 1;\n"},
     "breaks the modules' rule"),
])
def test_a_module_breaking_the_join_rule_is_refused_by_name(tmp_path, files, words):
    with pytest.raises(ModuleRuleError, match=re.escape(words)):
        joined(_write(tmp_path, files), "entry.js")


def test_the_join_puts_each_module_after_its_imports(tmp_path):
    (tmp_path / "sub").mkdir()
    _write(tmp_path / "sub", {"b.js": 'import { a } from "../a.js";\nexport const b = a + 1;\n'})
    root = _write(tmp_path, {
        "entry.js": 'import { b } from "./sub/b.js";\nimport { a } from "./a.js";\n'
                    "export default { run: () => a + b };\n",
        "a.js": "export const a = 1;\n"})
    assert joined(root, "entry.js").splitlines()[1:] == [
        "// -- a.js", "const a = 1;", "// -- sub/b.js", "const b = a + 1;",
        "// -- entry.js", "export default { run: () => a + b };"]


# -- in Chromium: the joined text draws what the modules draw ---------------------------

_SNAPSHOT = """() => {
  const root = document.querySelector('.labkit-sweep-board');
  const html = root.outerHTML.replace(/ data-(draw|sort)-ms="[^"]*"/g, '');
  const pixels = [...root.querySelectorAll('canvas')].map((c) => c.toDataURL());
  return { html, pixels, sent: lkTest.sent };
}"""
_DRAWN = "() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))"


def _play(board: Board, sweep: Sweep) -> list[dict]:
    """The same session on a board: frames, a sort, a brush and its curves, a pick."""
    seen = []

    def snap():
        board.page.evaluate(_DRAWN)
        seen.append(board.page.evaluate(_SNAPSHOT))

    board.deliver(sweep.paint())
    snap()
    moved = [dict(t, status=2) for t in sweep.trials[:5]]
    board.deliver(sweep.delta(moved, {str(t["id"]): [[99, 0.5]] for t in moved}))
    snap()
    board.page.click('.labkit-sweep-table th[data-key="latest"]')
    snap()
    board.drag_axis("width", 0.2, 0.7)
    (brush,) = board.wait_sent("brush")
    lines = {str(t["id"]): t["curve"] for t in sweep.trials[:3]}
    board.page.evaluate("m => lkTest.deliver(m)", {"kind": "curves", "brush": brush["brush"],
                                                   "lines": lines, "band": None})
    board.page.wait_for_function(
        "b => document.querySelector('.labkit-sweep-curves').dataset.brush === b",
        arg=str(brush["brush"]))
    snap()
    board.page.click(".labkit-sweep-table tr[data-trial]")
    board.page.evaluate("m => lkTest.deliver(m)", {"kind": "said", "text": "<b>said</b>"})
    snap()
    return seen


@pytest.mark.needs("chromium")
def test_the_joined_widget_code_draws_the_board_the_modules_draw():
    joined_text = bundle("sweep_board.js")
    runs = []
    with served_harness(ROOT, "board-modules-http") as url, chromium() as browser:
        for script in ("", f"window.lkJoined = {json.dumps(joined_text)};"):
            ctx = browser.new_context(viewport={"width": 900, "height": 1200})
            try:
                if script:
                    ctx.add_init_script(script)
                board = Board(ctx.new_page())
                board.load(url)
                assert board.page.evaluate("lkTest.error || null") is None
                assert board.page.evaluate("!!window.lkJoined") is bool(script)
                runs.append(_play(board, Sweep(300, seed=3, running=0.2)))
                assert board.errors == []
            finally:
                with contextlib.suppress(Exception):
                    ctx.close()
    modules, widget = runs
    assert len(modules) == len(widget) == 5
    for step, (a, b) in enumerate(zip(modules, widget, strict=True)):
        assert a["html"] == b["html"], f"step {step}: the DOM differs"
        assert a["pixels"] == b["pixels"], f"step {step}: a canvas differs"
        assert a["sent"] == b["sent"], f"step {step}: the messages sent differ"
    assert [m["kind"] for m in widget[-1]["sent"]] == ["hello", "brush", "show"]


def test_every_front_end_file_ships_as_package_data():
    with open(Path(ROOT) / "pyproject.toml", "rb") as f:
        globs = tomllib.load(f)["tool"]["setuptools"]["package-data"]["labkit.views"]
    shipped = [p.relative_to(ASSETS.parent).as_posix() for p in ASSETS.rglob("*")
               if p.is_file() and p.suffix in (".js", ".css")]
    # fnmatch's * crosses "/", setuptools' does not: compare folder by folder
    unshipped = [f for f in shipped if not any(
        fnmatch(f, g) and f.count("/") == g.count("/") for g in globs)]
    assert len(shipped) >= 15 and unshipped == []
