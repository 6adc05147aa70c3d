// labkit sweep board: the state the frames build (the board protocol's page side).
//
// The kernel sends one custom message per frame (see labkit/views/sweep/widget.py):
// a "paint" holds the whole state, a "delta" only what changed since the frame
// before it; each is applied whole to the state.  Rows are kept as columns (arrays
// indexed by a row's position; `index` maps a trial id to it).  Once the sweep
// ended, the kernel keeps its last frame in the model's state, in parts.

import { mergePareto } from "./pareto.js";
import { mergeWorkerSteps } from "./workers.js";

export const ROW_COLUMNS = ["status", "step", "latest", "best", "worker", "attempts", "moves"];

export function emptyState() {
  return {
    seq: null,
    meta: { name: "", metric: "", mode: "min", rule: null, params: [], kinds: {},
            categories: {}, statuses: [], workers: [] },
    ids: [], index: new Map(), touched: new Set(),   // rows changed since the last draw
    cols: Object.fromEntries(ROW_COLUMNS.map((c) => [c, []])), params: {},
    lines: new Map(), band: null,
    counts: {}, best: null, total: 0, status: "", ended: false, load: [], clock: null,
    waiting: false,   // the sweep waits for workers (its cluster has none)
    workerSteps: { steps: [], until: null },   // its usable workers over time (workers.js)
  };
}

function mergeRows(state, rows) {
  // Rows matched by id: a known trial's cells are overwritten, a new trial appended.
  const ids = rows.id || [];
  const given = rows.params || {};
  for (const p of [...(state.meta.params || []), ...Object.keys(given)]) {
    if (!state.params[p]) state.params[p] = new Array(state.ids.length).fill(null);
  }
  const paramCols = Object.entries(state.params);
  for (let i = 0; i < ids.length; i++) {
    const key = String(ids[i]);
    let at = state.index.get(key);
    if (at === undefined) {
      at = state.ids.length;
      state.index.set(key, at);
      state.ids.push(ids[i]);
      for (const c of ROW_COLUMNS) state.cols[c].push(null);
      for (const [, col] of paramCols) col.push(null);
    }
    state.touched.add(at);
    for (const c of ROW_COLUMNS) if (rows[c]) state.cols[c][at] = rows[c][i] ?? null;
    for (const p in given) state.params[p][at] = given[p][i] ?? null;
  }
}

function mergeCurves(state, curves, whole) {
  if (whole) state.lines = new Map();
  for (const [id, points] of Object.entries(curves.lines || {})) {
    const line = state.lines.get(id);
    if (line && !whole) for (const p of points) line.push(p);   // a delta's new points
    else state.lines.set(id, points.slice());
  }
  for (const id of curves.drop || []) state.lines.delete(String(id));
  if (whole || "band" in curves) state.band = curves.band ?? null;
}

export function applyFrame(state, msg, whole) {
  // One frame, whole: what it holds replaces or merges into `state`; absent keys stay.
  if (msg.meta) state.meta = { ...emptyState().meta, ...msg.meta };
  if (msg.rows) mergeRows(state, msg.rows);
  if (msg.curves) mergeCurves(state, msg.curves, whole);
  else if (whole) mergeCurves(state, {}, true);
  if (msg.pareto) mergePareto(state, msg.pareto, whole);     // several objectives only
  else if (whole) state.pareto = null;
  if (msg.workers || whole) mergeWorkerSteps(state, msg.workers, whole);
  for (const k of ["counts", "best", "total", "status", "ended", "load", "waiting"]) {
    if (k in msg) state[k] = msg[k];
  }
  state.seq = msg.seq;
}

export function mergeClock(pending, clock) {
  // Frames applied between two draws show together: the stamp spans all of them.
  if (!clock) return pending;
  if (!pending) return { ...clock };
  const least = (a, b) => (a == null ? b : b == null ? a : Math.min(a, b));
  const most = (a, b) => (a == null ? b : b == null ? a : Math.max(a, b));
  return { ...clock, oldest: least(pending.oldest, clock.oldest),
           newest: most(pending.newest, clock.newest),
           events: (+pending.events || 0) + (+clock.events || 0) };
}

export function rowOf(state, id) {
  return id === null || id === undefined ? undefined : state.index.get(String(id));
}

export function statusName(state, i) {
  const code = state.cols.status[i];
  return typeof code === "number" ? (state.meta.statuses[code] ?? String(code)) : String(code ?? "");
}

export function keptFrame(model, cache) {
  // The frame the kernel kept once the sweep ended: joined from the state's parts ("kept":
  // {key, parts}, then "kept_0", "kept_1", ...: no message over 100 KB), else the model's
  // "last" (a page's own, or an older notebook's).  Null while a part is missing.
  const index = model.get?.("kept");
  if (index && index.parts) {
    if (cache.key === index.key) return cache.frame;
    const texts = [];
    for (let i = 0; i < index.parts; i++) {
      const text = model.get(`kept_${i}`);
      if (typeof text !== "string") return null;
      texts.push(text);
    }
    cache.key = index.key;
    cache.frame = JSON.parse(texts.join(""));
    return cache.frame;
  }
  const last = model.get?.("last");
  return last && last.kind === "paint" ? last : null;
}
