"""Task lanes: shipped ESM/CSS, incremental span messages, and the ESM run in Node."""

import json
import pathlib
import subprocess
from importlib.resources import files

import numpy as np
import pytest
import traitlets

import labkit as lk
from labkit.events import TaskFailed, TaskFinished, TaskInfo
from labkit.views.notebook.lanes import TaskLanes
from labkit.views.trackers.tracker import Tracker
from labkit.views.writer import Writer

pytestmark = pytest.mark.usefixtures("no_thread_leak")


def _finish(tracker, i, worker="tcp://w1", node=0, ok=True):
    info = TaskInfo("r", i, i, "train", node, "PCA", 0)
    if ok:
        tracker(TaskFinished(info, worker, 100.0 + i, 100.5 + i, 10))
    else:
        tracker(TaskFailed(info, worker, 100.0 + i, 100.2 + i, "ValueError", f"bad [chunk {i}]"))


def test_front_end_files_ship_as_package_resources():
    js = (files("labkit.views") / "assets" / "lanes.js").read_text()
    css = (files("labkit.views") / "assets" / "lanes.css").read_text()
    assert "export default" in js and "render" in js and "import " not in js
    assert ".labkit-lanes" in css
    assert TaskLanes._esm == js and TaskLanes._css == css


def test_every_front_end_file_is_declared_package_data_of_the_views():
    """The wheel takes what pyproject declares: each asset matches a package-data glob."""
    import fnmatch

    from tests.conftest import ROOT

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    with open(f"{ROOT}/pyproject.toml", "rb") as f:
        setuptools = tomllib.load(f)["tool"]["setuptools"]
    import setuptools as st

    found = st.find_packages(ROOT, include=setuptools["packages"]["find"]["include"])
    assert "labkit.views" in found and "labkit.data_parallel.worker" in found
    globs = setuptools["package-data"]["labkit.views"]
    folder = pathlib.Path(str(files("labkit.views").joinpath("assets")))
    assets = [f"assets/{p.relative_to(folder).as_posix()}" for p in folder.rglob("*") if p.is_file()]
    assert {"assets/lanes.js", "assets/lanes.css", "assets/sweep_board/board.js"} <= set(assets)
    assert all(any(fnmatch.fnmatch(a, g) for g in globs) for a in assets), (assets, globs)


def test_only_new_spans_are_sent_and_a_new_view_gets_the_recent_ones(comms):
    tracker = Tracker()
    _finish(tracker, 0)
    lanes = TaskLanes(tracker)                     # what happened already is the first render
    try:
        opened = comms.state(lanes)
        assert [s["seq"] for s in opened["recent"]] == [0] and opened["workers"] == ["tcp://w1"]
        assert opened["t0"] == 100.0
        assert lanes.update(tracker) == 0 and comms.customs(lanes) == []
        _finish(tracker, 1, "tcp://w2")
        _finish(tracker, 2, ok=False)
        mark = len(comms)
        assert lanes.update(tracker) == 2
        (msg,) = comms.customs(lanes, since=mark)
        assert msg["kind"] == "spans" and [s["seq"] for s in msg["spans"]] == [1, 2]
        failed = msg["spans"][1]
        assert not failed["ok"] and failed["color"] == "#d62728" and "chunk 2" in failed["label"]
        (update,) = comms.updates(lanes, since=mark)   # new lanes and kinds in one message
        assert update["workers"] == ["tcp://w1", "tcp://w2"] and update["labels"] == ["w1", "w2"]
        assert [k["label"] for k in update["legend"]] == ["node 0 PCA", "failed"]
        assert [s["lane"] for s in msg["spans"]] == [1, 0]
        assert lanes.update(tracker) == 0 and len(comms) == mark + 2
        # a view that appears now says hello and is sent the recent spans
        lanes._handle_custom_msg(lanes, {"kind": "hello", "seen": -1}, [])
        resend = comms.customs(lanes)[-1]
        assert resend["resend"] and [s["seq"] for s in resend["spans"]] == [0, 1, 2]
        lanes.sync_recent()
        assert [s["seq"] for s in comms.state(lanes)["recent"]] == [0, 1, 2]
    finally:
        lanes.close()


def test_validators_bound_and_check_the_traits(comms):
    lanes = TaskLanes()
    try:
        lanes.recent = [{"seq": i, "lane": 0, "start": 0, "end": 1} for i in range(700)]
        assert len(lanes.recent) == TaskLanes.max_recent and lanes.recent[0]["seq"] == 200
        with pytest.raises(traitlets.TraitError):
            lanes.recent = [{"seq": 1}]
        lanes.workers = ["a", "b", "a"]
        assert lanes.workers == ["a", "b"]
        with pytest.raises(traitlets.TraitError):
            lanes.t0 = float("nan")
        lanes.lane_height = 1000
        assert lanes.lane_height == 60
    finally:
        lanes.close()


def test_a_real_run_streams_each_span_once(comms, dask_scheduler):
    tracker = Tracker()
    lanes = TaskLanes(tracker)
    writer = Writer(tracker, lambda snap: lanes.update(tracker))

    def on_event(event):
        tracker(event)
        writer.poke()

    unsubscribe = dask_scheduler.subscribe(on_event)
    try:
        data = np.random.default_rng(0).normal(size=(4000, 5))
        flow = lk.ParallelFlow([lk.nodes.PCA(output_dim=2)])
        flow.train([np.array_split(data, 40)], scheduler=dask_scheduler)
    finally:
        unsubscribe()
        writer.stop()
    sent = [s for msg in comms.customs(lanes) for s in msg["spans"]]
    seqs = [s["seq"] for s in sent]
    assert len(seqs) == 40 == lanes.sent and len(set(seqs)) == 40 and seqs == sorted(seqs)
    workers = comms.state(lanes)["workers"]
    assert sorted({s["lane"] for s in sent}) == list(range(len(workers))) and len(workers) == 2
    assert len(comms.customs(lanes)) <= writer.draws  # one message a draw at most
    lanes.close()


_NODE_HARNESS = r"""
// A minimal DOM and model, enough for lanes.js; prints what the view drew.
class Node {
  constructor(tag) { this.tag = tag; this.children = []; this.attrs = {}; this.dataset = {};
                     this.style = {}; this.className = ""; this.textContent = ""; }
  appendChild(c) { this.children.push(c); return c; }
  append(...cs) { for (const c of cs) this.appendChild(c); }
  replaceChildren(...cs) { this.children = []; this.append(...cs); }
  setAttribute(k, v) { this.attrs[k] = v; }
  remove() { this.removed = true; }
}
globalThis.document = { createElement: (t) => new Node(t),
                        createElementNS: (ns, t) => new Node(t) };
const handlers = {}; const sent = [];
const state = JSON.parse(process.argv[3]);
const model = {
  get: (k) => state[k], send: (m) => sent.push(m),
  on: (e, f) => { (handlers[e] ||= []).push(f); },
  off: (e, f) => { handlers[e] = (handlers[e] || []).filter((g) => g !== f); },
};
const mod = await import(process.argv[2]);
const el = new Node("div");
const cleanup = mod.default.render({ model, el });
const root = el.children[0];
const counts = [root.dataset.spans];
for (const msg of JSON.parse(process.argv[4])) {
  if (msg.set) {   // a trait the kernel changed: the model's value, then its change event
    state[msg.set] = msg.value;
    for (const f of handlers[`change:${msg.set}`] || []) f();
    continue;
  }
  for (const f of handlers["msg:custom"] || []) f(msg);
  counts.push(root.dataset.spans);
}
const svg = root.children[1].children[1].children[0];
const names = root.children[1].children[0].children.map((n) => n.textContent);
const blocks = svg.children.filter((r) => r.tag === "rect");   // not the dense view's group
const tips = blocks.map((r) => r.children[0].textContent);
cleanup();
console.log(JSON.stringify({ className: root.className, counts, sent, names, tips,
                             rects: blocks.length, viewBox: svg.attrs.viewBox,
                             left: Object.keys(handlers).filter((k) => handlers[k].length) }));
"""


@pytest.mark.needs("node")
def test_the_esm_renders_lanes_and_skips_spans_it_has(tmp_path):
    harness = tmp_path / "harness.mjs"
    harness.write_text(_NODE_HARNESS)
    esm = (files("labkit.views") / "assets" / "lanes.js")

    def span(seq, lane=0, ok=True):
        return {"seq": seq, "lane": lane, "start": seq * 0.5, "end": seq * 0.5 + 0.4,
                "ok": ok, "color": "#1f77b4", "alpha": 0.9, "label": f"chunk {seq}"}

    state = {"workers": ["tcp://w1", "tcp://w2"], "recent": [span(0)], "lane_height": 14,
             "title": "tasks", "t0": 100.0}
    # the view missed span 3 (sent before it existed) and sees 4 first: the resend fills it in
    messages = [{"kind": "spans", "spans": [span(1, lane=1), span(2, ok=False)]},
                {"kind": "spans", "spans": [span(4)]},
                {"kind": "spans", "spans": [span(0), span(1), span(2), span(3), span(4)],
                 "resend": True},
                {"kind": "other"},
                # the cluster told the workers' names after their lanes were drawn
                {"set": "labels", "value": ["worker 0", "worker 1 (2 threads)"]}]
    out = subprocess.run(["node", str(harness), esm.as_uri() if hasattr(esm, "as_uri")
                          else f"file://{esm}", json.dumps(state), json.dumps(messages)],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["className"] == "labkit-lanes"
    assert result["counts"] == ["1", "3", "4", "5", "5"]   # data-spans: each span drawn once
    assert result["rects"] == 5 and result["viewBox"] == "0 0 2.4 2"
    assert result["sent"] == [{"kind": "hello", "seen": 1}] and result["left"] == []
    assert result["names"] == ["worker 0", "worker 1 (2 threads)"]
    assert result["tips"][2] == "chunk 2: 0.400 s on w1 (failed)"
