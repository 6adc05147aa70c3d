"""A failing task in a notebook: the user's own line shown, labkit's plumbing not, no worker logs."""

from __future__ import annotations

import re

from tests.notebooks.run import execute_cells

SETUP = """
import numpy as np
import labkit as lk
s = lk.DaskScheduler(mode="processes", n_workers=2, threads_per_worker=1)
"""

DIRECT = """
def count_rows(chunk):
    if len(chunk) == 7:
        raise ValueError("seven rows are unlucky")
    return len(chunk)

for rows in [5, 7, 6, 7, 5, 7]:
    s.add_task(np.ones((rows, 3)), count_rows)
s.get_results()
"""

RUN = """
class Picky(lk.nodes.PCA):
    def _train(self, x):
        if len(x) == 7:
            raise ValueError("this node dislikes seven rows")
        super()._train(x)

    def _fork(self):
        return Picky(output_dim=self._output_dim)

flow = lk.ParallelFlow([Picky(output_dim=2)])
chunks = [np.random.default_rng(i).normal(size=(7 if i % 2 else 9, 3)) for i in range(6)]
run = flow.train([chunks], scheduler=s, wait=False)
run.result(timeout=120)
"""

AFTER = """
print("still usable:", s.add_task(np.ones((2, 2)), len) is not None, s.get_results())
s.shutdown()
"""

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _error(cell) -> dict:
    errors = [o for o in cell.outputs if o.output_type == "error"]
    assert len(errors) == 1, cell.outputs
    return errors[0]


def _traceback(cell) -> str:
    return ANSI.sub("", "\n".join(_error(cell)["traceback"]))


def test_a_failing_task_shows_the_users_line_and_few_labkit_frames():
    nb = execute_cells([SETUP, DIRECT, RUN, AFTER])
    setup, direct, run, after = nb.cells
    for cell, line, name in ((direct, 'raise ValueError("seven rows are unlucky")', "count_rows"),
                             (run, 'raise ValueError("this node dislikes seven rows")', "_train")):
        error, text = _error(cell), _traceback(cell)
        assert error["ename"] == "TaskError"
        assert line in text and name in text, text             # the user's own frame
        assert "direct cause" in text                           # shown as the remote cause
        # chunks 1, 3 and 5 fail (7 rows each); whichever fails first is the one named
        assert re.search(r"chunk [135]\b", error["evalue"]), error["evalue"]
        labkit_frames = re.findall(r"/labkit/[\w/]+\.py", text)
        assert len(labkit_frames) <= 2, labkit_frames           # the plumbing left out
        assert "distributed/" not in text and "_task_spec" not in text
    streams = "".join(o.get("text", "") for c in nb.cells for o in c.outputs
                      if o.output_type == "stream")
    assert "Compute Failed" not in streams, streams[-3000:]
    assert "still usable: True [2]" in streams
