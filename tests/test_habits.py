"""The habits `make test` keeps: ruff and mypy judge labkit/, and they do catch a fault."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

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


def test_the_coverage_figure_reads_a_run_and_names_the_modules_it_barely_reached(tmp_path):
    data = tmp_path / "coverage.data"
    script = tmp_path / "touch.py"
    script.write_text("import labkit.constraints as c\nc.check_argument('n', 3, [c.POSITIVE_INT])\n")
    ran = _run(sys.executable, "-m", "coverage", "run", f"--data-file={data}",
               "--source=labkit", str(script))
    assert ran.returncode == 0, ran.stderr
    shown = _run(sys.executable, os.path.join(ROOT, "tests", "coverage_figure.py"),
                 f"--data-file={data}", "--below", "101")
    assert shown.returncode == 0, shown.stderr
    figure = float(shown.stdout.split("by the tests: ")[1].split("%")[0])
    assert 0 < figure < 50                      # one module imported, a few lines run
    assert "labkit/constraints.py" in shown.stdout.split("modules under 101%:")[1]
    assert "labkit/scheduling" in shown.stdout   # each package has its line


def _make(*args) -> str:
    """What ``make`` prints for ``args`` in the repository (its stdout, stripped)."""
    make = shutil.which("make")
    if make is None:
        pytest.fail("make is not installed: the README's two commands need it")
    out = _run(make, "--no-print-directory", "-s", *args)
    assert out.returncode in (0, 1), out.stderr   # -q answers 1: "not up to date"
    return out.stdout.strip()


def test_make_test_leaves_the_tracer_out_and_make_coverage_runs_the_same_under_it():
    """Coverage's tracer is out of `make test` for its time (issue 45); `make coverage` has it."""
    show = ("--eval", 'lk-show-cov: ; @echo "[$(COV)]"', "lk-show-cov")
    assert _make(*show) == "[]"
    assert _make(*show, "COVERAGE=yes") == "[--cov --cov-report=]"
    database = _make("-pRrq", "--eval", "lk-nothing: ;", "lk-nothing")  # the rules, none run
    recipe = database.split("\ncoverage:\n", 1)[1].split("\n\n", 1)[0]
    assert "$(MAKE) --no-print-directory test COVERAGE=yes" in recipe, recipe


def test_the_soak_tally_reads_each_tests_outcome_from_junit_xml(tmp_path):
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    try:
        import soak
    finally:
        sys.path.pop(0)
    report = tmp_path / "round.xml"
    report.write_text(
        '<testsuites><testsuite>'
        '<testcase classname="tests.a" name="test_ok"/>'
        '<testcase classname="tests.a" name="test_bad"><failure message="boom"/></testcase>'
        '<testcase classname="tests.b" name="test_skip"><skipped/></testcase>'
        '</testsuite></testsuites>'
    )
    assert soak.outcomes_of(str(report)) == {
        "tests.a::test_ok": "passed", "tests.a::test_bad": "failed", "tests.b::test_skip": "skipped"
    }


def test_the_soaks_busy_processes_spin_and_end_with_the_block():
    import psutil

    sys.path.insert(0, os.path.join(ROOT, "tests"))
    try:
        import soak
    finally:
        sys.path.pop(0)
    with soak.busy(2) as pids:
        procs = [psutil.Process(pid) for pid in pids]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not all(p.cpu_times().user > 0.05 for p in procs):
            time.sleep(0.05)
        assert all(p.is_running() and p.cpu_times().user > 0.05 for p in procs)
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"
                   for pid in pids)


def test_the_soaks_busy_processes_end_when_the_soak_is_killed():
    import psutil

    code = ("import sys, time; sys.path.insert(0, 'tests'); import soak\n"
            "with soak.busy(1) as pids:\n    print(pids[0], flush=True)\n    time.sleep(300)\n")
    parent = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE,
                              text=True)
    try:
        child = int(parent.stdout.readline())
        assert psutil.pid_exists(child)
    finally:
        parent.kill()
        parent.wait()
        parent.stdout.close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and psutil.pid_exists(child):
        time.sleep(0.05)
    assert not psutil.pid_exists(child)
