"""tests/ordering.py: the files go to the xdist workers longest first, and a recorded run
folds into the table that orders them."""

import json
import subprocess
import sys
import types

from tests import ordering


def _items(*nodeids):
    return [types.SimpleNamespace(nodeid=n) for n in nodeids]


def test_files_go_longest_first_and_keep_their_tests_order(monkeypatch):
    monkeypatch.setattr(ordering, "file_seconds", lambda: {"a.py": 1.0, "b.py": 50.0,
                                                           "c.py": 5.0})
    items = _items("a.py::t1", "a.py::t2", "new.py::t", "b.py::t2", "b.py::t1", "c.py::t")
    ordering.longest_first(items)
    # new.py is not in the table: it counts as the median (5.0), and at a length equal to
    # c.py's the file collected first comes first
    assert [i.nodeid for i in items] == ["b.py::t2", "b.py::t1", "new.py::t", "c.py::t",
                                         "a.py::t1", "a.py::t2"]


def test_without_a_table_the_collected_order_stays(monkeypatch):
    monkeypatch.setattr(ordering, "file_seconds", lambda: {})
    items = _items("z.py::t", "a.py::t", "z.py::u")
    ordering.longest_first(items)
    assert [i.nodeid for i in items] == ["z.py::t", "z.py::u", "a.py::t"]


def test_a_recorded_xdist_run_folds_into_the_table(tmp_path, monkeypatch):
    (tmp_path / "test_one.py").write_text("import time\n"
                                          "def test_a(): time.sleep(0.3)\n"
                                          "def test_b(): pass\n")
    (tmp_path / "test_two.py").write_text("def test_c(): pass\n")
    record = tmp_path / "record"
    env = {**__import__("os").environ, "LABKIT_TEST_DURATIONS": str(record)}
    conftest = tmp_path / "conftest.py"   # the suite's two hooks, on their own
    conftest.write_text("from tests.ordering import record_report, start_recording\n"
                        "def pytest_configure(config): start_recording(config)\n"
                        "def pytest_runtest_logreport(report): record_report(report)\n")
    env["PYTHONPATH"] = str(ordering.os.path.dirname(ordering.os.path.dirname(ordering.TABLE)))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-n", "2", "--rootdir", str(tmp_path), "-c", "/dev/null",
                           str(tmp_path)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [json.loads(line) for path in record.glob("tests-*.jsonl")
             for line in path.read_text().splitlines()]
    # each test's set-up, call and tear-down, once each: the workers record nothing
    assert sorted(n.split("::")[1] for n, _ in lines) == 3 * ["test_a"] + 3 * ["test_b"] + \
        3 * ["test_c"]
    table = tmp_path / "durations.json"
    monkeypatch.setattr(ordering, "TABLE", str(table))
    folded = ordering.fold(str(record))
    assert json.loads(table.read_text()) == folded
    assert set(folded) == {"test_one.py", "test_two.py"}
    assert folded["test_one.py"] >= 0.3 > folded["test_two.py"]
