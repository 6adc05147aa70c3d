"""The API reference in docs/ builds with warnings as errors; the project's documents.

``make test`` runs this, so CI builds the docs the way ``make docs`` does (into a
temporary folder here, removed with it).
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

#: page -> names that must be documented there (the anchors autodoc gives them)
DOCUMENTED = {
    "labkit": ["labkit.board", "labkit.dashboard", "labkit.runner"],
    "scheduling": ["labkit.scheduling.DaskScheduler", "labkit.scheduling.LocalScheduler",
                   "labkit.scheduling.TaskCallable"],
    "flows": ["labkit.flows.ParallelFlow", "labkit.flows.Node", "labkit.flows.CheckpointFlow"],
    "nodes": ["labkit.nodes.PCA", "labkit.nodes.SFA", "labkit.nodes.TorchNode"],
    "data_parallel": ["labkit.data_parallel.split.split_batch",
                      "labkit.data_parallel.trainer.DataParallelTrainer"],
    "pipeline": ["labkit.pipeline.pipe", "labkit.pipeline.pipe_and_output"],
    "program": ["labkit.program.Program", "labkit.program.Seq"],
    "ensemble": ["labkit.ensemble.ParallelProcessing", "labkit.ensemble.ParallelEvaluation"],
    "experiments": ["labkit.experiments.sweep", "labkit.experiments.space.loguniform",
                    "labkit.experiments.trial.Trial", "labkit.experiments.rules.ASHA",
                    "labkit.experiments.result.SweepResult"],
    "views": ["labkit.views.Tracker", "labkit.views.board.board",
              "labkit.views.dashboard.dashboard"],
    "core": ["labkit.errors.LabkitError", "labkit.events.EventBus", "labkit.runs.Run"],
}


@pytest.fixture(scope="module")
def build(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    out = tmp_path_factory.mktemp("docs")
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html",
         "-d", str(out / "doctrees"), str(DOCS), str(out / "html")],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
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
            f"{name} has no description in api/{page}.html")


def test_the_index_links_every_api_page(built):
    _, html = built
    index = (html / "index.html").read_text()
    assert set(re.findall(r'href="api/(\w+)\.html"', index)) == set(DOCUMENTED)
    assert {p.stem for p in (DOCS / "api").glob("*.rst")} == set(DOCUMENTED)


def test_the_readme_says_how_to_build_the_docs():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Documentation", 1)[1].split("\n## ", 1)[0]
    assert "make docs" in section and "docs/_build/html" in section


def test_the_license_is_bsd_3_clause_and_ships_with_the_package():
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("BSD 3-Clause License")
    assert "Copyright (c) 2026, the labkit developers" in text
    assert "Neither the name of the copyright holder" in text    # clause 3
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "BSD-3-Clause"
    assert project["license-files"] == ["LICENSE"]
    extras = project["optional-dependencies"]
    assert any(r.startswith("sphinx") for r in extras["docs"])
    assert "docs" in re.search(r"labkit\[(.*)\]", extras["test"][0]).group(1).split(",")


def test_the_changelog_names_this_version():
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert re.search(rf"^## .*\b{re.escape(version)}\b", changelog, re.M)
