"""Executing the demo notebooks for the tests: nbclient, an isolated kernel, their outputs.

``execute(name)`` runs ``notebooks/<name>`` top to bottom in a fresh
``python3`` kernel of this environment, with the notebooks folder as working
directory and Jupyter's and IPython's folders pointed into a temporary folder
(nothing outside is read or written), and returns the executed notebook.
Widget state is stored, so tests can read what the widgets last showed.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile

import nbformat

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NOTEBOOKS = os.path.join(ROOT, "notebooks")


@contextlib.contextmanager
def _isolated():
    """Jupyter/IPython folders in a temporary folder; the repository on PYTHONPATH."""
    names = ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR",
             "PYTHONPATH", "MPLBACKEND")
    saved = {n: os.environ.get(n) for n in names}
    with tempfile.TemporaryDirectory(prefix="labkit-nb-") as scratch:
        for n, sub in zip(names[:4], ("config", "data", "runtime", "ipython")):
            os.environ[n] = os.path.join(scratch, sub)
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, saved["PYTHONPATH"]) if p)
        try:
            yield
        finally:
            for n, v in saved.items():
                if v is None:
                    os.environ.pop(n, None)
                else:
                    os.environ[n] = v


def _client_class():
    """nbclient's client, also keeping widget updates that arrive between cells.

    nbclient stores a comm message only when it answers the running cell; a
    board redrawn by its writer thread between two cells would be lost (and
    ipywidgets never resends an unchanged value), so the stored state could
    lag behind what a front-end shows.
    """
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionComplete
    from nbclient.util import ensure_async

    class Client(NotebookClient):
        async def _async_poll_output_msg(self, parent_msg_id, cell, cell_index):
            while True:
                msg = await ensure_async(self.kc.iopub_channel.get_msg(timeout=None))
                if msg["parent_header"].get("msg_id") == parent_msg_id:
                    try:
                        self.process_message(msg, cell, cell_index)
                    except CellExecutionComplete:
                        return
                elif msg["msg_type"] in ("comm_open", "comm_msg", "comm_close"):
                    self.handle_comm_msg([], msg, cell_index)

        def handle_comm_msg(self, outs, msg, cell_index):
            # a closed widget is gone from the page: keep no state of it (nbclient would)
            if msg["msg_type"] == "comm_close":
                comm_id = msg["content"].get("comm_id")
                self.widget_state.pop(comm_id, None)
                self.widget_buffers.pop(comm_id, None)
                return
            super().handle_comm_msg(outs, msg, cell_index)
    return Client


#: Appended while executing (then removed): waits until every view drew its last state (an
#: event, not a time: a loaded machine draws late), so the saved widget state holds it.
SETTLE = ("from labkit.views.writer import settled\n"
          "assert settled(60), 'a view did not draw its last state within 60 s'")


def execute(name: str, timeout: int = 240) -> nbformat.NotebookNode:
    """Run ``notebooks/<name>`` in a fresh kernel; the executed notebook."""
    return run(nbformat.read(os.path.join(NOTEBOOKS, name), as_version=4), timeout)


def execute_cells(sources: list[str], timeout: int = 240) -> nbformat.NotebookNode:
    """Run a notebook made of ``sources`` (one code cell each); errors stay in the outputs."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(src) for src in sources])
    return run(nb, timeout, allow_errors=True)


def run(nb, timeout: int = 240, allow_errors: bool = False) -> nbformat.NotebookNode:
    """Execute ``nb`` in a fresh kernel of this environment; the executed notebook."""
    nb.cells.append(nbformat.v4.new_code_cell(SETTLE))
    with _isolated():
        _client_class()(nb, timeout=timeout, kernel_name="python3", store_widget_state=True,
                        allow_errors=allow_errors,
                        resources={"metadata": {"path": NOTEBOOKS}}).execute()
    nb.cells.pop()
    return nb


def text(nb) -> str:
    """Every stream and plain-text output of the notebook, joined.

    A cell's printed lines come first, whole: a line that another stream (a warning
    on stderr, say, on a loaded machine) cut in two outputs is put back together.
    """
    parts = []
    for cell in nb.cells:
        printed, others = [], []
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                (printed if out.get("name") == "stdout" else others).append(out["text"])
            elif "data" in out and "text/plain" in out["data"]:
                others.append(out["data"]["text/plain"])
        parts.extend(["".join(printed)] if printed else [])
        parts.extend(others)
    return "\n".join(parts)


def figure(nb, label: str) -> float:
    """The number printed after ``label`` (``label: 0.97`` or ``label 0.97``)."""
    match = re.search(re.escape(label) + r"[:=]?\s*(-?[0-9.]+(?:e-?[0-9]+)?)", text(nb))
    assert match, f"{label!r} not printed; outputs:\n{text(nb)[-2000:]}"
    return float(match.group(1))


def widget_states(nb) -> dict:
    """``{model id: state}`` of the widgets the notebook stored."""
    store = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    return {k: v.get("state", {}) for k, v in store.get("state", {}).items()}


def progress_bars(nb) -> list[tuple[int, int]]:
    """``(value, max)`` of every stored progress bar, except the boards' failed-task bars."""
    return [(s["value"], s["max"]) for s in widget_states(nb).values()
            if s.get("_model_name") == "IntProgressModel" and s.get("bar_style") != "danger"]


def html_values(nb, css_class: str) -> list[str]:
    """The HTML of stored HTML widgets that carry ``css_class``."""
    return [s.get("value", "") for s in widget_states(nb).values()
            if s.get("_model_name") == "HTMLModel" and css_class in s.get("_dom_classes", [])]
