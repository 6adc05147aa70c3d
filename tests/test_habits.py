"""The habits `make test` keeps: ruff and mypy judge labkit/, and they do catch a fault."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.dirname(sys.executable)


def _tool(name: str) -> str:
    path = os.path.join(BIN, name)
    if not os.path.exists(path):
        path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: it is in the test extras (pip install -e '.[test]')")
    return path


def _run(*args, cwd=ROOT):
    return subprocess.run(list(args), cwd=cwd, capture_output=True, text=True, timeout=600)


def test_ruff_passes_labkit_and_catches_an_unused_import(tmp_path):
    ruff = _tool("ruff")
    assert _run(ruff, "check", "labkit").returncode == 0
    assert _run(ruff, "format", "--check", "labkit").returncode == 0
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n")
    out = _run(ruff, "check", "--config", os.path.join(ROOT, "pyproject.toml"), str(bad))
    assert out.returncode != 0 and "F401" in out.stdout, out.stdout


def test_mypy_with_the_projects_settings_catches_a_type_error(tmp_path):
    mypy = _tool("mypy")
    bad = tmp_path / "bad.py"
    bad.write_text("def half(x: int) -> int:\n    return x / 2\n")
    out = _run(mypy, "--config-file", os.path.join(ROOT, "pyproject.toml"), str(bad),
               cwd=tmp_path)
    assert out.returncode != 0 and "Incompatible return value" in out.stdout, out.stdout
