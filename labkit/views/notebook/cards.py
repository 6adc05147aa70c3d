"""HTML cards of schedulers, runs, flows and nodes, for a notebook's rich display.

Like Dask's ``Client``, a labkit object that is a cell's result shows what it
is at a glance: a scheduler its workers, threads, memory and dashboard links;
a flow its nodes, each node's phase, samples and state; a run its status.
The engine keeps plain ``repr``\\ s; :func:`labkit.views.notebook.display.register`
hands these functions to IPython's HTML formatter, so the engine imports no
view.  Each card reads the object as it is now and never blocks.

Examples
--------
>>> import labkit as lk
>>> flow = lk.Flow([lk.nodes.PCA(output_dim=2)])
>>> card = flow_card(flow)
>>> "labkit-card" in card and "PCA" in card and "not trained" in card
True
"""

from __future__ import annotations

import html
import sys

from ...scheduling.dask.connect import scheduler_identity

__all__ = ["scheduler_card", "run_card", "flow_card", "node_card"]

_STYLE = (
    "font-family: var(--jp-ui-font-family, sans-serif); font-size: 13px; "
    "border-left: 3px solid #1f77b4; padding: 4px 10px; margin: 2px 0"
)


def _card(title: str, rows: list[tuple[str, str]], table: str = "") -> str:
    """A titled box of ``name: value`` rows (values already HTML) and an optional table."""
    body = "".join(
        f"<tr><th style='text-align:left;padding-right:12px'>{html.escape(k)}</th>"
        f"<td style='text-align:left'>{v}</td></tr>"
        for k, v in rows
    )
    return (
        f"<div class='labkit-card' style='{_STYLE}'><b>{title}</b>"
        f"<table style='margin:2px 0'>{body}</table>{table}</div>"
    )


def _link(url: str | None) -> str:
    if not url:
        return "<i>none</i>"
    safe = html.escape(url, quote=True)
    return f"<a href='{safe}' target='_blank'>{safe}</a>"


def _bytes(n) -> str:
    if not n:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n} B"
        n /= 1024
    return "?"


def _labkit_dashboard(scheduler) -> str | None:
    """The URL of a labkit dashboard serving ``scheduler``, without starting Bokeh."""
    module = sys.modules.get("labkit.views.bokeh.dashboard")
    return module.running_url(scheduler) if module is not None else None


def scheduler_card(scheduler) -> str:
    """A scheduler: kind, state, workers, threads, memory, open tasks and dashboards."""
    kind = type(scheduler).__name__
    if getattr(scheduler, "closed", False):
        return _card(f"labkit {html.escape(kind)}", [("state", "shut down")])
    rows = [("state", "open"), ("open tasks", str(scheduler.total_open_tasks))]
    client = getattr(scheduler, "client", None)
    if client is not None:
        rows += _cluster_rows(scheduler, client)
    else:
        rows.append(("runs", "in this process, one task at a time"))
    rows.append(("labkit dashboard", _link(_labkit_dashboard(scheduler))))
    return _card(f"labkit {html.escape(kind)}", rows)


def _cluster_rows(scheduler, client) -> list[tuple[str, str]]:
    """Rows about a Dask cluster, asked of its scheduler."""
    try:
        info = scheduler_identity(client)
    except Exception as exc:  # a client closing under us: say so, never raise in a repr
        return [("cluster", html.escape(f"unreachable ({type(exc).__name__})"))]
    workers = info.get("workers", {})
    threads = sum(w.get("nthreads", 0) for w in workers.values())
    memory = sum(w.get("memory_limit", 0) or 0 for w in workers.values())
    mode = getattr(scheduler, "mode", "?")
    where = (
        "embedded cluster"
        if getattr(scheduler, "cluster", None) is not None
        else "existing cluster"
    )
    return [
        ("cluster", html.escape(f"{info.get('address', '?')} ({where}, mode {mode!r})")),
        ("workers", f"{_how_workers_run(workers)} · {threads} threads · {_bytes(memory)} memory"),
        ("Dask dashboard", _link(getattr(scheduler, "dashboard_link", None))),
    ]


def _how_workers_run(workers: dict) -> str:
    """``1 worker in this process`` or ``2 worker processes``: how the cluster really runs."""
    here = sum(1 for address in workers if str(address).startswith("inproc://"))
    apart = len(workers) - here
    parts = []
    if here:
        parts.append(f"{here} worker{'s' * (here != 1)} in this process")
    if apart or not parts:
        parts.append(f"{apart} worker process{'es' * (apart != 1)}")
    return " + ".join(parts)


def run_card(run) -> str:
    """A run: kind, id, status and, once done, its error."""
    rows = [("status", html.escape(run.status))]
    if run.done() and not run.cancelled():
        error = run.exception(timeout=0)
        if error is not None:
            rows.append(("error", f"<code>{html.escape(str(error))}</code>"))
    return _card(f"labkit run {html.escape(run.kind)} {html.escape(run.id)}", rows)


def _node_state(node) -> str:
    """``training phase 1/2``, ``trained`` or ``not trained``."""
    if not node.is_trainable():
        return "nothing to train"
    if not node.is_training():
        return "trained"
    phases = node.n_phases()
    of = f"/{phases}" if phases else ""
    if node.phase == 0 and not node.samples_seen:
        return "not trained"
    return f"training phase {node.phase + 1}{of}"


def _dims(node) -> str:
    return (
        f"{node.input_dim if node.input_dim is not None else '?'} → "
        f"{node.output_dim if node.output_dim is not None else '?'}"
    )


def node_card(node) -> str:
    """A node: dimensions, training state, samples and joins so far."""
    return _card(
        f"labkit node {html.escape(type(node).__name__)}",
        [
            ("dimensions", html.escape(_dims(node))),
            ("state", html.escape(_node_state(node))),
            ("samples seen", f"{node.samples_seen:,}"),
            ("joins", str(node.joins)),
        ],
    )


def flow_card(flow) -> str:
    """A flow: one row per node, with its dimensions, state and samples."""
    rows = "".join(
        f"<tr><td>{i}</td><td>{html.escape(type(n).__name__)}</td>"
        f"<td>{html.escape(_dims(n))}</td><td>{html.escape(_node_state(n))}</td>"
        f"<td style='text-align:right'>{n.samples_seen:,}</td></tr>"
        for i, n in enumerate(flow.nodes)
    )
    table = (
        "<table class='labkit-flow-nodes'><tr><th>#</th><th>node</th><th>dims</th>"
        f"<th>state</th><th>samples</th></tr>{rows}</table>"
    )
    trained = sum(1 for n in flow.nodes if not n.is_training() or not n.is_trainable())
    return _card(
        f"labkit {html.escape(type(flow).__name__)}",
        [("nodes", f"{len(flow.nodes)} · {trained} trained")],
        table,
    )
