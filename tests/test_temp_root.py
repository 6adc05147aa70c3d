"""The test session's temporary root is its own: no other pytest run can remove it.

pytest's default root, ``pytest-of-<user>`` in the system's temp folder, is shared by
every pytest run of the user and keeps only the newest runs; a run beside this one
removed this run's folders mid-run (issue 44: 190 errors).  ``tests/conftest.py`` gives
each session a fresh ``labkit-pytest-*`` folder and removes it at the end.  Two nested
sessions run at once here, each waiting for the other, and each must find its folders
in a root of its own that is gone when it has ended.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.conftest import ROOT

#: Set (to a folder) in the nested sessions only: they then hold the probe test below.
PROBE = "LABKIT_TEMP_ROOT_PROBE"


def _shared_root() -> Path:
    """pytest's default root, shared by all runs of a user."""
    import getpass
    return Path(tempfile.gettempdir()).resolve() / f"pytest-of-{getpass.getuser()}"


if os.environ.get(PROBE):  # collected only inside the nested sessions
    def test_probe_holds_its_folder_while_another_session_runs(tmp_path, tmp_path_factory):
        """Record this session's root, wait for the other session, check the folder is kept."""
        folder = Path(os.environ[PROBE])
        (tmp_path / "mine").write_text("kept")
        (folder / f"{os.getpid()}.json").write_text(json.dumps(
            {"base": str(tmp_path_factory.getbasetemp()), "tmp": str(tmp_path)}))
        deadline = time.monotonic() + 120
        while len(list(folder.glob("*.json"))) < 2:     # the other session is running too
            assert time.monotonic() < deadline, "the other session never started"
            time.sleep(0.05)
        assert (tmp_path / "mine").read_text() == "kept"


def test_two_sessions_at_once_each_have_a_root_of_their_own_removed_at_the_end(tmp_path):
    env = {**os.environ, PROBE: str(tmp_path)}
    env.pop("PYTEST_ADDOPTS", None)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               f"{__file__}::test_probe_holds_its_folder_while_another_session_runs"]
    runs = [subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True) for _ in range(2)]
    outputs = [run.communicate(timeout=240)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    seen = [json.loads(p.read_text()) for p in tmp_path.glob("*.json")]
    bases = {Path(s["base"]) for s in seen}
    assert len(bases) == 2, seen                       # one root each
    for base in bases:
        assert base.name.startswith("labkit-pytest-"), base
        assert _shared_root() not in base.parents, base
        assert not base.exists(), f"{base} was left behind"


def test_a_root_left_by_a_killed_run_is_removed_by_the_next_run(tmp_path):
    # a run killed before its end (a CI timeout, a SIGKILL) cannot remove its root
    probe = subprocess.Popen([sys.executable, "-c", "pass"])
    probe.wait()                                      # a pid that no process has any more
    left = Path(tempfile.mkdtemp(prefix=f"labkit-pytest-{probe.pid}-"))
    (left / "kept-by-nobody").write_text("")
    mine = Path(tempfile.mkdtemp(prefix=f"labkit-pytest-{os.getpid()}-"))  # a live run's
    try:
        env = {**os.environ, PROBE: str(tmp_path)}
        env.pop("PYTEST_ADDOPTS", None)
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "--collect-only", f"{__file__}::test_probe_holds_its_folder_while_"
                        "another_session_runs"], cwd=ROOT, env=env, capture_output=True,
                       timeout=240, check=True)
        assert not left.exists()
        assert mine.exists()                          # a live run's root is never touched
    finally:
        shutil.rmtree(left, ignore_errors=True)
        shutil.rmtree(mine, ignore_errors=True)


def test_each_xdist_worker_has_a_root_inside_the_session_s_own_removed_at_the_end(tmp_path):
    # `make test` runs on xdist workers: each must get a folder of the controller's own root
    env = {**os.environ, PROBE: str(tmp_path)}
    env.pop("PYTEST_ADDOPTS", None)
    probe = f"{__file__}::test_probe_holds_its_folder_while_another_session_runs"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
               "--dist", "each", probe]                # each worker runs the probe, at once
    run = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stdout + run.stderr
    seen = [json.loads(p.read_text()) for p in tmp_path.glob("*.json")]
    bases = {Path(s["base"]) for s in seen}
    assert len(bases) == 2, seen                       # one folder a worker
    roots = {base.parent for base in bases}
    assert len(roots) == 1, bases                      # ... in the one root of the session
    root = roots.pop()
    assert root.name.startswith("labkit-pytest-"), root
    assert {base.name for base in bases} == {"popen-gw0", "popen-gw1"}, bases
    assert not root.exists(), f"{root} was left behind"
