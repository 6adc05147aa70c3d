"""The Binder (repo2docker) configuration in binder/: its shape, and a build the way repo2docker does it.

There is no Docker here, so the slow test does by hand what repo2docker's
build and start do, in a fresh virtual environment:

1. copy the repository (its files that git does not ignore) into a folder, as
   repo2docker copies it into the image;
2. ``pip install -r binder/requirements.txt`` from that folder's root;
3. run ``binder/postBuild`` there, with the environment first on ``PATH``;
4. run notebook 01 under ``binder/start`` (which must exec its arguments) in a
   kernel of that environment, with ``JUPYTERHUB_SERVICE_PREFIX`` set as on
   Binder, and check what it printed.

Nothing of the repository or of the main environment is on ``PYTHONPATH``, so
the notebook runs on what the Binder files installed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BINDER = ROOT / "binder"
HUB_PREFIX = "/user/labkit-test/"


def _requirement_lines() -> list[str]:
    lines = []
    for line in (BINDER / "requirements.txt").read_text().splitlines():
        line = line.split(" #", 1)[0].strip()
        if line and not line.startswith("#"):
            lines.append(line)
    return lines


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text.split("+")[0])[:3])


# -- fast: the files' shape ------------------------------------------------------------


def test_binder_files_have_the_expected_shape():
    post_build = (BINDER / "postBuild").read_text().splitlines()
    assert post_build[0] == "#!/bin/bash"
    assert post_build[1].startswith("set -e")                    # stop at the first failure
    start = (BINDER / "start").read_text().splitlines()
    assert start[0] == "#!/bin/bash"
    code = [line.strip() for line in start if line.strip() and not line.strip().startswith("#")]
    assert code[-1] == 'exec "$@"'                                # runs the server in its place
    for script in ("postBuild", "start"):
        assert os.access(BINDER / script, os.X_OK), f"binder/{script} is not executable"
        subprocess.run(["bash", "-n", str(BINDER / script)], check=True)  # parses
    requirements = _requirement_lines()
    assert "torch==2.13.0" in requirements                        # never an unpinned CUDA build
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in requirements
    proxy = [r for r in requirements if r.startswith("jupyter-server-proxy==")]
    assert proxy and _version_tuple(proxy[0].split("==")[1]) >= (4, 1, 1)   # CVE-2024-28179
    local = [r for r in requirements if re.match(r"(-e\s+)?\.\[", r)]
    assert local and set(re.search(r"\[(.*)\]", local[0]).group(1).split(",")) >= {
        "views", "demo", "torch"}
    assert (BINDER / "runtime.txt").read_text().strip() == "python-3.11"


#: Libraries whose versions the views and the trainer depend on: the Binder image must
#: have the ones the test suite runs with.
TESTED = ("bokeh", "jupyter_bokeh", "ipywidgets", "dask", "distributed", "torch")


def _pins() -> dict[str, str]:
    """binder/requirements.txt's pins by normalised name; fails on any line not pinned."""
    pins = {}
    for line in _requirement_lines():
        if line.startswith(("-e ", "--extra-index-url ", "--index-url ")):
            continue                            # labkit itself, and where torch comes from
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([0-9][0-9A-Za-z.+!-]*)", line)
        assert match, f"binder/requirements.txt: {line!r} is not pinned with =="
        name = re.sub(r"[-_.]+", "-", match.group(1)).lower()
        assert name not in pins, f"binder/requirements.txt pins {name} twice"
        pins[name] = match.group(2)
    return pins


def test_every_binder_requirement_is_pinned_to_the_tested_version():
    from importlib.metadata import version
    from packaging.version import Version

    pins = _pins()
    missing = [name for name in TESTED if name.replace("_", "-") not in pins]
    assert not missing, f"binder/requirements.txt does not pin {missing}"
    for name in TESTED:
        installed = Version(version(name))
        pinned = Version(pins[name.replace("_", "-")])
        # torch: the test environment has the CPU build (2.13.0+cpu); the pin names the
        # release (==2.13.0), which the CPU index's local version satisfies
        assert pinned == Version(installed.public), (
            f"binder/requirements.txt pins {name}=={pinned}, the tests run with {installed}")


def test_the_pin_check_rejects_an_unpinned_line(monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "_requirement_lines",
                        lambda: ["-e .[views]", "bokeh==3.9.2", "ipywidgets>=8.1"])
    with pytest.raises(AssertionError, match="'ipywidgets>=8.1' is not pinned"):
        _pins()


def test_start_points_dask_dashboards_at_the_hub_proxy():
    """Behind a hub, Dask's link template gives the proxy path; elsewhere nothing changes."""
    show = ("from distributed.utils import format_dashboard_link; "
            "print(format_dashboard_link('127.0.0.1', 8787))")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("JUPYTERHUB_", "DASK_DISTRIBUTED__DASHBOARD", "BOKEH_"))}
    behind_hub = subprocess.run([str(BINDER / "start"), sys.executable, "-c", show],
                                env={**env, "JUPYTERHUB_SERVICE_PREFIX": HUB_PREFIX},
                                capture_output=True, text=True, timeout=120, check=True)
    assert behind_hub.stdout.strip() == f"{HUB_PREFIX}proxy/8787/status"
    alone = subprocess.run([str(BINDER / "start"), sys.executable, "-c", show], env=env,
                           capture_output=True, text=True, timeout=120, check=True)
    assert alone.stdout.strip() == "http://127.0.0.1:8787/status"
    # start passes its arguments on untouched and returns the command's status
    status = subprocess.run([str(BINDER / "start"), "sh", "-c", "exit 7"], env=env, timeout=60)
    assert status.returncode == 7


# -- slow: build the environment as repo2docker would, run notebook 01 in it ------------------


_RUN_NOTEBOOK = textwrap.dedent('''
    """Run a notebook with nbclient in a python3 kernel of this environment; write it out."""
    import os, sys
    import nbformat
    from nbclient import NotebookClient

    source, target = sys.argv[1:3]
    nb = nbformat.read(source, as_version=4)
    # checks of the environment, run after the notebook's own cells (the file is not changed)
    nb.cells.append(nbformat.v4.new_code_cell(
        "import sys, labkit, torch\\n"
        "from distributed.utils import format_dashboard_link\\n"
        "print('kernel python:', sys.executable)\\n"
        "print('labkit from:', labkit.__file__)\\n"
        "print('torch:', torch.__version__)\\n"
        "print('dask dashboard link:', format_dashboard_link('127.0.0.1', 8787))\\n"
        "with labkit.LocalScheduler() as s:\\n"
        "    print('labkit dashboard link:', labkit.dashboard(s))"))
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": os.path.dirname(source)}}).execute()
    nbformat.write(nb, target)
    print("executed", source, "with", sys.executable)
''')


def _copy_repository(target: Path) -> None:
    """The repository's files that git does not ignore (what a clone plus work would hold)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, timeout=60)
    if listed.returncode == 0:
        for name in filter(None, listed.stdout.decode().split("\0")):
            source = ROOT / name
            if source.is_file():
                (target / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target / name)
    else:  # not a git checkout
        shutil.copytree(ROOT, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns(
            ".git", ".venv*", "build", "dist", "*.egg-info", "__pycache__", "test-artifacts",
            ".pytest_cache", "dask-*-space"))


def _clean_env(venv: Path, scratch: Path) -> dict:
    """This process's environment without its Python paths; the new venv first on PATH."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "JUPYTER_PATH")
           and not k.startswith(("JUPYTERHUB_", "DASK_DISTRIBUTED__DASHBOARD", "BOKEH_"))}
    env["PATH"] = os.pathsep.join([str(venv / "bin"), env.get("PATH", "")])
    env["VIRTUAL_ENV"] = str(venv)
    env["PYTHONUNBUFFERED"] = "1"
    for name, sub in [("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_DATA_DIR", "data"),
                      ("JUPYTER_RUNTIME_DIR", "runtime"), ("IPYTHONDIR", "ipython")]:
        env[name] = str(scratch / sub)
        (scratch / sub).mkdir(parents=True, exist_ok=True)
    return env


def _run(step: str, cmd, timings: dict, **kw) -> subprocess.CompletedProcess:
    started = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    timings[step] = round(time.monotonic() - started, 1)
    assert proc.returncode == 0, (f"{step} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n"
                                  f"{proc.stderr[-4000:]}")
    return proc


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_binder_environment_builds_and_runs_notebook_01(tmp_path):
    import nbformat
    from tests.notebooks.run import figure, text

    repo, venv, scratch = tmp_path / "repo", tmp_path / "venv", tmp_path / "scratch"
    repo.mkdir()
    _copy_repository(repo)
    env = _clean_env(venv, scratch)
    timings: dict = {}
    _run("venv", [sys.executable, "-m", "venv", str(venv)], timings, timeout=300)
    # On Binder download.pytorch.org answers. Here it cannot be resolved, and pip would
    # retry that index 5 times for every package, pausing 0.5, 1, 2 and 4 s (some 15
    # minutes in all), before going on without it. One retry comes without a pause, so
    # PIP_RETRIES=1 costs nothing and still lets a PyPI download be tried twice; the
    # variable (rather than --retries) also reaches the pip that installs labkit's build
    # requirements. The failure is a name lookup that fails at once: no --timeout needed.
    # torch==2.13.0 then comes from this machine's local copy of the CPU build.
    pip_env = {**env, "PIP_RETRIES": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    # --no-compile: pip would byte-compile every module of every package (all of torch,
    # its tests included), most of the install's CPU time; Python compiles the modules
    # the checks below import when they import them, which is all a session needs.
    _run("pip install -r binder/requirements.txt",
         [str(venv / "bin" / "python"), "-m", "pip", "install", "--no-compile",
          "-r", "binder/requirements.txt"],
         timings, cwd=repo, env=pip_env, timeout=1200)
    post = _run("binder/postBuild", [str(repo / "binder" / "postBuild")], timings, cwd=repo,
                env=pip_env, timeout=600)
    assert "postBuild: labkit 0.1.0" in post.stdout
    again = _run("binder/postBuild again", [str(repo / "binder" / "postBuild")], timings,
                 cwd=repo, env=pip_env, timeout=600)        # idempotent: installs nothing
    assert "Installing" not in again.stdout + again.stderr

    extensions = _run("jupyter server extension list",
                      [str(venv / "bin" / "jupyter"), "server", "extension", "list"], timings,
                      cwd=repo, env=env, timeout=120)
    assert re.search(r"jupyter_server_proxy\b.*enabled", extensions.stdout + extensions.stderr)

    script = tmp_path / "run_notebook.py"
    script.write_text(_RUN_NOTEBOOK)
    executed = tmp_path / "executed.ipynb"
    run = _run("notebook 01 under binder/start",
               [str(repo / "binder" / "start"), str(venv / "bin" / "python"), str(script),
                str(repo / "notebooks" / "01-parallel-flows.ipynb"), str(executed)],
               timings, cwd=repo / "notebooks",
               env={**env, "JUPYTERHUB_SERVICE_PREFIX": HUB_PREFIX}, timeout=900)
    print("binder build and run timings (s):", timings)
    assert f"with {venv / 'bin' / 'python'}" in run.stdout

    nb = nbformat.read(executed, as_version=4)
    assert figure(nb, "test accuracy:") > 0.9
    out = text(nb)
    assert "scheduler closed: True" in out
    assert f"kernel python: {venv / 'bin' / 'python'}" in out
    assert f"labkit from: {repo / 'labkit' / '__init__.py'}" in out   # the editable install
    assert "torch: 2.13.0+cpu" in out
    assert f"dask dashboard link: {HUB_PREFIX}proxy/8787/status" in out
    assert re.search(rf"labkit dashboard link: {HUB_PREFIX}proxy/\d+/labkit", out)
