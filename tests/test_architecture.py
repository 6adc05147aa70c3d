"""labkit's shape, measured on the source (tests/architecture.py): the limits of issue 36.

The first tests hold the whole package to the limits: no import circle inside
a package, no module over 450 lines, no function over 60, no folder of more
than 16 modules (issue 45: folders, not prefixes), at most 40 private
names reached on something other than ``self``/``cls``, and a docstring in
every package's ``__init__`` saying what the room is for.  The others plant
small packages in a temporary folder and show that each measure catches what
it is meant to (and leaves alone what it is not): a checker that finds nothing
because it looks at nothing would pass the first tests too.
"""

from __future__ import annotations

import ast
import pathlib
import textwrap

import pytest

from tests import architecture as arch


def missing_docstrings(root: pathlib.Path = arch.PACKAGE) -> list[str]:
    """The packages under ``root`` (itself included) whose ``__init__`` has no docstring."""
    return [
        arch.module_name(init, root)
        for init in sorted(root.rglob("__init__.py"))
        if not ast.get_docstring(ast.parse(init.read_text()))
    ]


# -- labkit itself ---------------------------------------------------------------------


def test_no_import_circle_inside_any_package():
    assert arch.circles(arch.graph()) == []


def test_no_module_is_over_450_lines():
    assert arch.long_modules() == {}


def test_no_function_is_over_60_lines():
    assert arch.long_functions() == {}


def test_no_folder_holds_more_than_16_modules():
    assert arch.crowded_folders() == {}


def test_no_handler_is_found_by_a_name_built_at_run_time():
    """Issue 45: handlers sit in tables keyed by event class (``labkit.events.handles``)."""
    assert arch.names_built() == []


def test_at_most_40_private_names_are_reached_on_another_object():
    reaches = arch.private_reaches()
    assert len(reaches) <= arch.MAX_PRIVATE_REACHES, "\n".join(reaches)


def test_every_package_says_what_its_room_is_for():
    assert missing_docstrings() == []


def test_the_measures_read_the_whole_package():
    found = arch.modules()
    assert {"labkit", "labkit.errors", "labkit.runs", "labkit.constraints"} <= set(found)
    assert len(found) > 100 and all(path.suffix == ".py" for path in found.values())


# -- the measures, on planted packages ----------------------------------------------------


def plant(tmp_path: pathlib.Path, files: dict[str, str]) -> pathlib.Path:
    """A package ``pkg`` under ``tmp_path`` with ``files`` (path -> source); its root."""
    root = tmp_path / "pkg"
    for name, source in {"__init__.py": '"""A planted package."""\n', **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))
    return root


def test_module_names_follow_the_folders(tmp_path):
    root = plant(tmp_path, {"a.py": "", "sub/__init__.py": "", "sub/b.py": ""})
    assert set(arch.modules(root)) == {"pkg", "pkg.a", "pkg.sub", "pkg.sub.b"}


def test_a_circle_is_caught_and_a_lazy_import_closes_one_too(tmp_path):
    root = plant(tmp_path, {
        "a.py": "from . import b\n",
        "b.py": "def later():\n    from .a import thing\n    return thing\n",
        "c.py": "import pkg.a\n",                       # into the circle, not part of it
    })
    assert arch.graph(root)["pkg.b"] == {"pkg.a"}
    assert arch.circles(arch.graph(root)) == [["pkg.a", "pkg.b"]]


def test_a_circle_inside_a_subpackage_is_caught_with_its_relative_imports(tmp_path):
    root = plant(tmp_path, {
        "sub/__init__.py": '"""Sub."""\nfrom .x import X\n',
        "sub/x.py": "from .y import Y\nX = 1\n",
        "sub/y.py": "from ..sub.x import X\nY = 2\n",
        "z.py": "from .sub import x\n",
    })
    assert arch.circles(arch.graph(root)) == [["pkg.sub.x", "pkg.sub.y"]]


def test_no_circle_where_imports_only_go_down_or_through_an_init(tmp_path):
    root = plant(tmp_path, {
        "__init__.py": '"""Top."""\nfrom .a import A\nfrom .b import B\n',
        "a.py": "from .b import B\nA = B\n",
        "b.py": "import os\nB = 1\n",
        "sub/__init__.py": '"""Sub."""\nfrom ..a import A\n',
        "sub/c.py": "from .. import a\nfrom . import d\n",
        "sub/d.py": "import pkg.sub\n",  # its own package's __init__ is no edge
    })
    assert arch.circles(arch.graph(root)) == []
    assert arch.graph(root)["pkg"] == set()  # an __init__ re-exports; it closes no circle


def test_a_long_module_is_caught_at_451_lines(tmp_path):
    root = plant(tmp_path, {
        "long.py": "x = 1\n" * (arch.MAX_MODULE_LINES + 1),
        "fits.py": "x = 1\n" * arch.MAX_MODULE_LINES,
    })
    assert arch.long_modules(root) == {"pkg.long": arch.MAX_MODULE_LINES + 1}


def test_a_long_function_is_caught_methods_and_async_ones_too(tmp_path):
    body = "    x = 1\n" * (arch.MAX_FUNCTION_LINES - 1)   # with the def: 60 lines
    root = plant(tmp_path, {
        "f.py": (
            f"def fits():\n{body}\n"
            f"def long():\n{body}    return x\n\n"
            f"class C:\n    async def method(self):\n{textwrap.indent(body, '    ')}"
            "        return x\n"
        ),
    })
    found = arch.long_functions(root)
    assert set(found) == {"pkg.f:62 long", "pkg.f:125 method"}
    assert set(found.values()) == {arch.MAX_FUNCTION_LINES + 1}


def test_a_private_reach_is_caught_and_self_cls_super_are_not(tmp_path):
    root = plant(tmp_path, {
        "r.py": """
            import os

            class A:
                _shared = 1

                def __init__(self, other):
                    self._mine = other._theirs          # one reach
                    type(self)._shared = 2
                    super().__init__()

                @classmethod
                def make(cls):
                    return cls._shared

                def show(self, obj):
                    return obj._repr_mimebundle_(), obj.__dict__, os._exit

            def f(group):
                return group._client._gid             # two reaches
        """,
    })
    assert sorted(arch.private_reaches(root)) == [
        "pkg.r:20 group._client",
        "pkg.r:20 group._client._gid",
        "pkg.r:8 other._theirs",
    ]


def test_a_package_without_a_docstring_is_named(tmp_path):
    root = plant(tmp_path, {"sub/__init__.py": "from .a import A\n", "sub/a.py": "A = 1\n",
                            "said/__init__.py": '"""Said."""\n'})
    assert missing_docstrings(root) == ["pkg.sub"]


def test_the_script_prints_every_finding(capsys, monkeypatch):
    monkeypatch.setattr("sys.argv", ["architecture.py", "labkit.runs"])
    kinds = arch.main()
    out = capsys.readouterr().out
    for title in ("import circles:", "long modules:", "long functions:", "private reaches:"):
        assert title in out
    assert 0 <= kinds <= 4


@pytest.mark.parametrize("edges, expected", [
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ({"a": {"b"}, "b": set()}, []),
    ({"a": {"a"}}, []),                                   # a module importing itself: no circle
    ({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c"}}, [["a", "b"], ["c", "d"]]),
])
def test_circles_are_the_strongly_connected_groups(edges, expected):
    assert sorted(arch.circles(edges)) == expected


def test_a_crowded_folder_is_caught_and_its_subfolders_are_counted_apart(tmp_path):
    flat = {f"m{i}.py": "" for i in range(16)}  # with __init__: 17 in one folder
    nested = {f"sub/m{i}.py": "" for i in range(15)}  # with its __init__: 16, the limit
    root = plant(tmp_path, {**flat, "sub/__init__.py": "", **nested})
    assert arch.crowded_folders(root) == {"pkg": 17}  # 16 and its __init__; sub is apart


def test_a_name_built_to_look_up_is_caught_and_a_plain_name_is_left_alone(tmp_path):
    root = plant(tmp_path, {"a.py": """
        def on(self, event, kind, field):
            getattr(self, "_on_" + type(event).__name__)
            getattr(self, f"_on_{kind}", None)
            hasattr(self, "_on_%s" % kind)
            getattr(self, "_".join(["on", kind]))
            getattr(self, field.name)
            getattr(event, "run", None)
        """})
    found = arch.names_built(root)
    assert [line.split()[0] for line in found] == ["pkg.a:3", "pkg.a:4", "pkg.a:5", "pkg.a:6"]
