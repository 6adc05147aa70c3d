"""Bokeh components: the models, and updates that send only what changed."""

import numpy as np

import labkit as lk
from labkit.events import DeviceStats, NodeJoined, TaskFailed, TaskFinished, TaskInfo
from labkit.views.bokeh.components import FAILED_COLOR, Components
from labkit.views.trackers.tracker import Tracker


def _finished(task, worker="tcp://127.0.0.1:1", node=0, phase=0, t=100.0):
    return TaskFinished(TaskInfo("r", task, task, "train", node, "PCA", phase), worker,
                        t + task, t + task + 0.5, 10)


def _spans(c):
    return c.task_stream.select_one({"name": "labkit-task-stream-spans"}).data_source


class MessageCounter:
    """Counts the document events a source emits (what would go over the wire)."""

    def __init__(self, doc):
        self.kinds, self.models = [], []
        doc.on_change(self._record)

    def _record(self, event):
        self.kinds.append(type(event).__name__)
        self.models.append(getattr(event, "model", None))

    def of(self, model):
        """Kinds of the events that changed ``model``."""
        return [k for k, m in zip(self.kinds, self.models) if m is model]


def test_models_exist_with_their_names():
    from bokeh.document import Document
    c = Components(Tracker())
    doc = Document()
    doc.add_root(c.layout)
    for name in ("labkit-components", "labkit-device-load", "labkit-device-load-source",
                 "labkit-task-stream", "labkit-task-stream-spans", "labkit-node-state",
                 "labkit-node-table", "labkit-node-plots"):
        assert doc.get_model_by_name(name) is not None, name
    assert "labkit-task-stream" in c.task_stream.css_classes
    assert c.layout.children == [c.device_load, c.task_stream, c.node_state]


def test_update_streams_only_new_spans_with_a_rollover():
    from bokeh.document import Document
    tracker = Tracker()
    c = Components(tracker, max_spans=5)
    doc = Document()
    doc.add_root(c.layout)
    for task in range(3):
        tracker(_finished(task))
    c.update()
    assert len(_spans(c).data["start"]) == 3
    counter = MessageCounter(doc)
    c.update()                                            # nothing new: nothing sent
    assert counter.of(_spans(c)) == []
    assert len(_spans(c).data["start"]) == 3
    tracker(_finished(3, worker="tcp://127.0.0.1:2"))
    tracker(TaskFailed(TaskInfo("r", 4, 4, "train", 0, "PCA", 0), "tcp://127.0.0.1:2",
                       104.0, 104.2, "ValueError", "bad"))
    c.update()
    assert counter.of(_spans(c)) == ["ColumnsStreamedEvent"]  # two rows, streamed once
    data = _spans(c).data
    assert len(data["start"]) == 5 and data["color"][-1] == FAILED_COLOR
    assert list(c.task_stream.y_range.factors) == ["127.0.0.1:1", "127.0.0.1:2"]
    for task in range(5, 9):
        tracker(_finished(task))
    c.update()
    assert len(_spans(c).data["start"]) == 5              # the rollover bound holds
    assert _spans(c).data["chunk"][-1] == 8


def test_device_bars_patch_when_the_devices_stay_the_same():
    from bokeh.document import Document
    tracker = Tracker()
    c = Components(tracker)
    doc = Document()
    doc.add_root(c.layout)
    tracker(DeviceStats("cuda:0", kind="device", memory=2**30, memory_limit=2**34,
                        samples_per_s=100.0))
    c.update()
    assert list(c.device_source.data["name"]) == ["cuda:0"]
    assert "1 GiB / 16 GiB" in c.device_source.data["label"][0]
    counter = MessageCounter(doc)
    tracker(DeviceStats("cuda:0", kind="device", memory=2**31, memory_limit=2**34,
                        samples_per_s=200.0))
    c.update()
    assert counter.of(c.device_source) == ["ColumnsPatchedEvent"]
    assert c.device_source.data["samples_per_s"][0] == 200.0


def test_node_plot_grows_with_joins():
    tracker = Tracker()
    c = Components(tracker)
    sizes = []
    for joins in (1, 2, 3):
        tracker(NodeJoined("r", 0, "PCA", 0, joins, {
            "phase": 0, "phases": 1, "training": True, "samples": 100 * joins,
            "plots": {"eigenvalues": [float(j) for j in range(joins)]}}))
        c.update()
        (fig,) = c.node_plots.children
        sizes.append(len(fig.renderers[0].data_source.data["y"]))
    assert sizes == [1, 2, 3]
    assert fig.name == "labkit-node-plot-r-0"
    table = c.node_rows
    assert list(table["joins"]) == ["3 joins"] and list(table["samples"]) == [300]


def test_device_bars_per_worker_after_a_dask_run(dask_scheduler, cluster):
    from labkit.nodes.pca import PCA
    tracker = Tracker()
    dask_scheduler.subscribe(tracker, state_every=0.5)  # node plots, as a view asks
    c = Components(tracker)
    chunks = [np.random.default_rng(i).normal(size=(50, 4)) for i in range(8)]
    lk.ParallelFlow([PCA(output_dim=2)]).train([chunks], scheduler=dask_scheduler,
                                               join="client")   # a join a chunk
    c.update()
    workers = set(cluster.scheduler_info["workers"])
    names = set(c.device_source.data["name"])
    assert names and names <= workers
    assert sum(c.device_source.data["done"]) == 8
    assert len(_spans(c).data["start"]) == 8
    assert c.node_rows["name"] == ["PCA"]
    assert c.node_rows["training"] == ["trained"]
    assert c.node_rows["joins"] == ["8 joins"] and c.node_rows["samples"] == [400]
    (fig,) = c.node_plots.children
    assert len(fig.renderers[0].data_source.data["y"]) == 2      # the kept eigenvalues


def test_a_new_run_reuses_the_node_plot_and_the_table_is_html_escaped():
    tracker = Tracker()
    c = Components(tracker, max_node_plots=1)
    for run, values in (("r1", [3.0, 2.0]), ("r2", [5.0])):
        tracker(NodeJoined(run, 0, "<PCA>", 0, 1, {
            "phase": 0, "phases": 1, "training": True, "samples": 1234,
            "plots": {"eigenvalues": values}}))
        c.update()
        if run == "r1":
            (first,) = c.node_plots.children
    (fig,) = c.node_plots.children
    assert fig is first                                   # no new figure for the new run
    assert fig.name == "labkit-node-plot-r2-0" and "node 0 <PCA>: eigenvalues" in fig.title.text
    assert list(fig.renderers[0].data_source.data["y"]) == [5.0]
    text = c.node_table.text
    assert text.count("labkit-node-row") == 2 and "&lt;PCA&gt;" in text and "<PCA>" not in text
    assert "1,234" in text and c.node_rows["run"] == ["r1", "r2"]


def _joined(run, node, values):
    return NodeJoined(run, node, "PCA", 0, 1, {"phase": 0, "phases": 1, "training": True,
                                               "samples": 10, "plots": {"eigenvalues": values}})


def test_new_node_plots_past_the_limit_are_left_for_a_later_update():
    tracker = Tracker()
    c = Components(tracker, max_node_plots=2, spare_plot=False)  # as a board makes them
    for node in (0, 1):
        tracker(_joined("r", node, [2.0, 1.0]))
    assert c.update(new_plots=0) is True                  # a first frame: no new figure
    assert [type(f).__name__ for f in c.node_plots.children] == ["Div"]  # the placeholder
    assert c.node_rows["node"] == [0, 1]                  # the table has both nodes
    assert c.update(new_plots=1) is True                  # one made, one left
    assert [f.name for f in c.node_plots.children] == ["labkit-node-plot-r-0"]
    assert c.update(new_plots=0) is True and len(c.node_plots.children) == 1
    assert c.update() is False                            # no limit: every plot
    assert [f.name for f in c.node_plots.children] == ["labkit-node-plot-r-0",
                                                       "labkit-node-plot-r-1"]


def test_a_figure_freed_by_a_node_no_longer_shown_is_no_new_plot():
    tracker = Tracker()
    c = Components(tracker, max_node_plots=1, spare_plot=False)
    tracker(_joined("r", 0, [2.0, 1.0]))
    c.update()
    (made,) = c.node_plots.children
    tracker(_joined("r2", 0, [3.0]))                      # a new run's node takes its place
    assert c.update(new_plots=0) is False
    assert list(c.node_plots.children) == [made] and made.name == "labkit-node-plot-r2-0"


def test_a_spare_figure_is_no_new_plot():
    tracker = Tracker()
    c = Components(tracker, spare_plot=True)
    tracker(_joined("r", 0, [1.0]))
    assert c.update(new_plots=0) is False
    assert [f.name for f in c.node_plots.children] == ["labkit-node-plot-r-0"]
