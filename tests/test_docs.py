"""The docs build with warnings as errors: the user guide (a page per room), the notebooks
rendered into it, and the API reference; the README stays short and links the guide.

``make test`` runs this, so CI builds the docs the way ``make docs`` does (into a
temporary folder here, removed with it).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from html import escape as html_escape
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
NOTEBOOKS = ROOT / "notebooks"

#: room -> its guide page (docs/guide/<page>.md) and the API pages that page links
ROOMS = {
    "scheduling": ("scheduling", ["scheduling"]),
    "flows": ("flows", ["flows", "nodes"]),
    "data-parallel": ("data-parallel", ["data_parallel"]),
    "experiments": ("experiments", ["experiments"]),
    "views": ("views", ["views"]),
    "ensembles": ("ensembles", ["ensemble"]),
    "pipelines": ("pipelines", ["pipeline"]),
    "programs": ("programs", ["program"]),
}
#: the README's length at most: what labkit is, two commands, a taste, the layout, links
README_LINES = 150

#: page -> names that must be documented there (the anchors autodoc gives them)
DOCUMENTED = {
    "labkit": ["labkit.board", "labkit.dashboard", "labkit.runner"],
    "scheduling": [
        "labkit.scheduling.DaskScheduler",
        "labkit.scheduling.LocalScheduler",
        "labkit.scheduling.TaskCallable",
    ],
    "flows": ["labkit.flows.ParallelFlow", "labkit.flows.Node", "labkit.flows.CheckpointFlow"],
    "nodes": ["labkit.nodes.PCA", "labkit.nodes.SFA", "labkit.nodes.TorchNode"],
    "data_parallel": [
        "labkit.data_parallel.split.split_batch",
        "labkit.data_parallel.trainer.DataParallelTrainer",
    ],
    "pipeline": ["labkit.pipeline.pipe", "labkit.pipeline.pipe_and_output"],
    "program": ["labkit.program.Program", "labkit.program.Seq"],
    "ensemble": ["labkit.ensemble.ParallelProcessing", "labkit.ensemble.ParallelEvaluation"],
    "experiments": [
        "labkit.experiments.sweep",
        "labkit.experiments.search.space.loguniform",
        "labkit.experiments.trials.trial.Trial",
        "labkit.experiments.search.rules.ASHA",
        "labkit.experiments.result.SweepResult",
    ],
    "views": [
        "labkit.views.Tracker",
        "labkit.views.notebook.board.board",
        "labkit.views.bokeh.dashboard.dashboard",
    ],
    "core": [
        "labkit.errors.LabkitError",
        "labkit.event_bus.EventBus",
        "labkit.runs.Run",
        "labkit.constraints.Interval",
        "labkit.constraints.Options",
    ],
}


@pytest.fixture(scope="module")
def build(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    out = tmp_path_factory.mktemp("docs")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-W",
            "--keep-going",
            "-b",
            "html",
            "-d",
            str(out / "doctrees"),
            str(DOCS),
            str(out / "html"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return proc, out / "html"


@pytest.fixture
def built(build) -> tuple[subprocess.CompletedProcess, Path]:
    """The build, once it succeeded (else each test says why it did not)."""
    proc, _ = build
    assert proc.returncode == 0, f"sphinx-build failed:\n{proc.stdout[-3000:]}\n{proc.stderr}"
    return build


def test_the_docs_build_without_a_warning(built):
    proc, _ = built
    assert "WARNING" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("page", list(DOCUMENTED))
def test_each_api_page_documents_its_names(built, page):
    _, html = built
    text = (html / "api" / f"{page}.html").read_text()
    for name in DOCUMENTED[page]:
        assert f'id="{name}"' in text, f"{name} is not documented in api/{page}.html"
        # its docstring rendered below the signature, not just the name
        after = text.split(f'id="{name}"', 1)[1]
        body = after.split("<dd>", 1)[1].split("</dd>", 1)[0]
        assert re.match(r"\s*(<p>Bases:.*?</p>\s*)?<p>\s*\w", body), (
            f"{name} has no description in api/{page}.html"
        )


def test_the_index_links_every_api_page(built):
    _, html = built
    index = (html / "index.html").read_text()
    assert set(re.findall(r'href="api/(\w+)\.html"', index)) == set(DOCUMENTED)
    assert {p.stem for p in (DOCS / "api").glob("*.rst")} == set(DOCUMENTED)


def _body(page_html: str) -> str:
    """The page's own text, without the sidebar (which links every page)."""
    return page_html.split('role="main"', 1)[1].split('class="sphinxsidebar"', 1)[0]


def _guide_pages() -> set[str]:
    return {p.stem for p in (DOCS / "guide").glob("*.md")}


@pytest.mark.parametrize("room", list(ROOMS))
def test_each_room_has_a_guide_page_that_links_its_api(built, room):
    _, html = built
    page, apis = ROOMS[room]
    assert (DOCS / "guide" / f"{page}.md").is_file(), f"no guide page for the room {room}"
    body = _body((html / "guide" / f"{page}.html").read_text())
    assert re.search(r"<h1>\w", body), f"guide/{page} has no title"
    assert len(re.sub(r"<[^>]+>", "", body).split()) > 100, f"guide/{page} says next to nothing"
    for api in apis:
        assert f'href="../api/{api}.html' in body, f"guide/{page} does not link api/{api}"


def test_the_index_links_every_guide_page_and_every_notebook(built):
    _, html = built
    index = _body((html / "index.html").read_text())
    assert set(re.findall(r'href="guide/([\w-]+)\.html"', index)) == _guide_pages()
    notebooks = {p.stem for p in NOTEBOOKS.glob("*.ipynb")}
    assert len(notebooks) >= 6
    assert set(re.findall(r'href="notebooks/([\w-]+)\.html"', index)) == notebooks
    # docs/notebooks/ holds links to the repository's notebooks, not copies that drift
    for name in notebooks:
        linked = DOCS / "notebooks" / f"{name}.ipynb"
        assert linked.resolve() == (NOTEBOOKS / f"{name}.ipynb").resolve(), linked


def test_each_notebook_is_rendered_with_all_its_code(built):
    _, html = built
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        code = [c for c in cells if c["cell_type"] == "code"]
        page = (html / "notebooks" / f"{path.stem}.html").read_text()
        assert page.count('<div class="cell docutils container"') == len(code), path.name
        title = "".join(cells[0]["source"]).splitlines()[0].lstrip("# ").strip()
        assert html_escape(title) in page, f"{path.name}: its title {title!r} is not rendered"


def test_the_readme_is_short_and_links_the_guide():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= README_LINES, "the README grew: move the detail into docs/"
    assert set(re.findall(r"\]\(docs/guide/([\w-]+)\.md\)", readme)) == _guide_pages()
    commands = readme.split("## Two commands", 1)[1].split("\n## ", 1)[0]
    assert "make demo" in commands and "make test" in commands


def test_the_readme_layout_names_every_package():
    readme = (ROOT / "README.md").read_text()
    layout = readme.split("## Layout", 1)[1].split("\n## ", 1)[0]
    packages = {p.parent.name for p in (ROOT / "labkit").glob("*/__init__.py")}
    packages.discard("_widgets")
    for name in sorted(packages):
        assert f"`labkit/{name}/`" in layout, f"the README's layout does not place labkit/{name}/"


@pytest.mark.parametrize("document", ["README.md", "CONTRIBUTING.md"])
def test_relative_links_point_at_files(document):
    text = (ROOT / document).read_text()
    for target in re.findall(r"\]\((?!https?:|#)([^)#\s]+)", text):
        assert (ROOT / target).exists(), f"{document} links {target}, which does not exist"


def test_contributing_says_where_changes_go_and_how_to_check_them():
    text = (ROOT / "CONTRIBUTING.md").read_text()
    for check in [
        "make test",
        "ruff",
        "B,SIM,UP,I,C90",
        "mypy",
        "check_untyped_defs",
        "tests/architecture.py",
        "benchmarks/RESULTS.md",
    ]:
        assert check in text, f"CONTRIBUTING.md does not mention {check}"
    for limit in ["450", "60", "12"]:
        assert re.search(rf"\b{limit}\b", text), f"CONTRIBUTING.md does not give the limit {limit}"
    for room in ["scheduling", "flows", "data_parallel", "experiments", "views", "checkpoints"]:
        assert f"labkit/{room}/" in text, f"CONTRIBUTING.md does not place labkit/{room}/"


def test_the_notebook_renderer_is_pinned():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    docs = project["optional-dependencies"]["docs"]
    assert any(r.startswith("myst-nb") for r in docs), docs
    pins = (ROOT / "constraints.txt").read_text()
    assert re.search(r"^myst-nb==", pins, re.M), "myst-nb is not pinned in constraints.txt"
    conf = (DOCS / "conf.py").read_text()
    assert 'nb_execution_mode = "off"' in conf  # the tests execute the notebooks, not Sphinx


def test_the_readme_says_how_to_build_the_docs():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Documentation", 1)[1].split("\n## ", 1)[0]
    assert "make docs" in section and "docs/_build/html" in section


def test_the_license_is_bsd_3_clause_and_ships_with_the_package():
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("BSD 3-Clause License")
    assert "Copyright (c) 2026, the labkit developers" in text
    assert "Neither the name of the copyright holder" in text  # clause 3
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "BSD-3-Clause"
    assert project["license-files"] == ["LICENSE"]
    extras = project["optional-dependencies"]
    assert any(r.startswith("sphinx") for r in extras["docs"])
    test_extras = re.search(r"labkit\[(.*)\]", extras["test"][0])
    assert test_extras is not None, extras["test"][0]
    assert "docs" in test_extras.group(1).split(",")


def test_the_changelog_names_this_version():
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert re.search(rf"^## .*\b{re.escape(version)}\b", changelog, re.M)
