// labkit sweep board: the notebook's live view of a sweep, drawn from frames.
//
// Plain ESM for anywidget, no build step and no imports.  The kernel sends one
// custom message per frame (the board protocol, see labkit/views/sweep_widget.py):
// a "paint" holds the whole state, a "delta" only what changed since the frame
// before it.  Each message is applied whole to `state` as it arrives; drawing
// waits for the next animation frame, so however many frames arrive between two
// repaints, the status line, table and plots are drawn once, from one state, and
// never disagree.  A delta whose base is not the last seq applied means a frame
// was lost: the page says "hello" and ignores deltas until the paint answering it.
//
// Rows are kept as columns (arrays indexed by a row's position, `index` maps a
// trial id to it).  The table is a sorted, brushed list of positions (`order`),
// and only the rows in view (plus OVERSCAN each way) exist in the DOM.  Both
// plots are canvases: the curves draw the lines the frames carry and the band
// of quantiles over the rest; the parallel coordinates draw every trial as a
// density (2-D bins between neighbouring axes), so their cost is the bins', not
// the trials'.  Brushing an axis filters the table here at once and asks the
// kernel for the curves of the brushed trials.

const ROW_H = 20;             // px: the table's fixed row height (the CSS agrees)
const OVERSCAN = 6;           // rows drawn beyond the view, each way
const CURVES_H = 220;         // px: the plots' heights
const PARALLEL_H = 210;
const HELLO_AGAIN_MS = 2000;  // a hello unanswered this long is sent again on the next gap
const CLICK_PX = 3;           // a drag shorter than this on an axis is a click (clears it)
const SAID_KEPT = 4;          // lines the message area keeps
const FADED = new Set(["stopped", "failed", "cancelled"]);
const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                 "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
const ROW_COLUMNS = ["status", "step", "latest", "best", "worker", "attempts"];
// The table's fixed columns: key, header, the most characters a cell shows (a number
// takes at most 10, see fmt), and whether it holds words (a little wider than digits).
const FIXED = [["trial", "trial", 12, false], ["status", "status", 10, true],
               ["step", "step", 8, false], ["latest", "latest", 10, false],
               ["best", "best", 10, false], ["worker", "worker", 15, true],
               ["attempts", "attempts", 4, false]];

// -- words and numbers ---------------------------------------------------------------

function fmt(v) {
  // A number in 4 significant digits, at most 10 characters ("-1.235e-12"); null a dash.
  if (v === null || v === undefined) return "–";
  if (typeof v !== "number") return String(v);
  if (!Number.isFinite(v)) return String(v);
  if (Number.isInteger(v) && Math.abs(v) < 1e6) return String(v);
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(3).replace(/\.?0+e/, "e");
  return String(Number(v.toPrecision(4)));
}

function short(text, n) {
  // Cut in the text itself, not by CSS, so no cell is ever wider than its box.
  text = String(text);
  return text.length <= n ? text : text.slice(0, Math.max(n - 1, 1)) + "…";
}

function shortWorker(name) {
  // "worker 0 (this process, 2 threads)" -> "worker 0"; "tcp://10.0.0.2:4012" -> "10.0.0.2:4012"
  return String(name).replace(/^[a-z]+:\/\//, "").replace(/\s*\(.*\)$/, "");
}

function niceTicks(lo, hi, n = 5) {
  // Round numbers from lo to hi (the ends themselves where none fit).
  if (!(hi > lo) || !Number.isFinite(hi - lo)) return [lo];
  const raw = (hi - lo) / Math.max(n - 1, 1);
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw);
  const first = Math.ceil(lo / step) * step;
  const out = [];
  for (let i = 0; i < 2 * n; i++) {
    const t = first + i * step;
    if (t > hi + step * 1e-9) break;
    out.push(Math.abs(t) < step * 1e-9 ? 0 : t);
  }
  return out.length ? out : [lo, hi];
}

function node(tag, cls, text) {
  const n = document.createElement(tag);
  if (cls) n.className = cls;
  if (text !== undefined) n.textContent = text;
  return n;
}

// -- the state the frames build ------------------------------------------------------

function emptyState() {
  return {
    seq: null,
    meta: { name: "", metric: "", mode: "min", rule: null, params: [], kinds: {},
            categories: {}, statuses: [], workers: [] },
    ids: [], index: new Map(), touched: new Set(),   // rows changed since the last draw
    cols: Object.fromEntries(ROW_COLUMNS.map((c) => [c, []])), params: {},
    lines: new Map(), band: null,
    counts: {}, best: null, total: 0, status: "", ended: false, load: [], clock: null,
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

function applyFrame(state, msg, whole) {
  // One frame, whole: what it holds replaces or merges into `state`; absent keys stay.
  if (msg.meta) state.meta = { ...emptyState().meta, ...msg.meta };
  if (msg.rows) mergeRows(state, msg.rows);
  if (msg.curves) mergeCurves(state, msg.curves, whole);
  else if (whole) mergeCurves(state, {}, true);
  for (const k of ["counts", "best", "total", "status", "ended", "load"]) {
    if (k in msg) state[k] = msg[k];
  }
  state.seq = msg.seq;
}

function mergeClock(pending, clock) {
  // Frames applied between two draws show together: the stamp spans all of them.
  if (!clock) return pending;
  if (!pending) return { ...clock };
  const least = (a, b) => (a == null ? b : b == null ? a : Math.min(a, b));
  const most = (a, b) => (a == null ? b : b == null ? a : Math.max(a, b));
  return { ...clock, oldest: least(pending.oldest, clock.oldest),
           newest: most(pending.newest, clock.newest),
           events: (+pending.events || 0) + (+clock.events || 0) };
}

function rowOf(state, id) {
  return id === null || id === undefined ? undefined : state.index.get(String(id));
}

function statusName(state, i) {
  const code = state.cols.status[i];
  return typeof code === "number" ? (state.meta.statuses[code] ?? String(code)) : String(code ?? "");
}

// -- axes: a param or the metric's value, on 0..1 ------------------------------------

function columnOf(state, name) {
  // An axis's cells: a param's, or for "value" the metric's latest (final, once ended), as
  // the kernel's brush reads it.
  return name === "value" ? state.cols.latest : (state.params[name] || []);
}

function equalSpan(v) {
  // [lo, hi] of an axis whose every value is v: v ± 5% of |v|, or 0..0.5 for 0 (and -0.5..0
  // never: an axis of zeros holds no negative value), so no value the sweep cannot have shows.
  if (v === 0) return [0, 0.5];
  const d = Math.abs(v) * 0.05;
  return [v - d, v + d];
}

function makeAxis(state, name) {
  // {name, label, toUnit(v) -> 0..1 | null, fromUnit(u) -> v, ticks: [[u, label]], category}
  const kind = name === "value" ? "number" : (state.meta.kinds[name] || "number");
  const label = name === "value" ? (state.meta.metric || "value")
    : kind === "log" ? `${name} (log)` : name;
  if (kind === "category") {
    const cats = state.meta.categories[name] || [];
    const span = Math.max(cats.length - 1, 0);
    const toUnit = (v) => (typeof v !== "number" ? null : span ? v / span : 0.5);
    const ticks = cats.length <= 8 ? cats.map((c, i) => [toUnit(i), String(c)])
      : [[0, String(cats[0])], [1, String(cats[cats.length - 1])]];
    return { name, label, category: true, toUnit, fromUnit: (u) => u * span, ticks };
  }
  const log = kind === "log";
  let lo = Infinity, hi = -Infinity;
  for (const v of columnOf(state, name)) {
    if (typeof v !== "number" || !Number.isFinite(v) || (log && v <= 0)) continue;
    const x = log ? Math.log10(v) : v;
    if (x < lo) lo = x;
    if (x > hi) hi = x;
  }
  if (lo === Infinity) { lo = 0; hi = 1; }
  if (hi === lo) {
    // every value equal: centred on it, 5% of it each way, on a log axis as on a linear one
    const [a, b] = equalSpan(log ? 10 ** lo : lo);
    [lo, hi] = log ? [Math.log10(a), Math.log10(b)] : [a, b];
  }
  const toUnit = (v) => {
    if (typeof v !== "number" || !Number.isFinite(v) || (log && v <= 0)) return null;
    return ((log ? Math.log10(v) : v) - lo) / (hi - lo);
  };
  const fromUnit = (u) => (log ? 10 ** (lo + u * (hi - lo)) : lo + u * (hi - lo));
  const ticks = [[0, fmt(fromUnit(0))], [1, fmt(fromUnit(1))]];
  return { name, label, category: false, toUnit, fromUnit, ticks };
}

function passMask(state, brushes) {
  // Uint8Array: 1 where a row is inside every brushed range (null: no brush, all pass).
  if (!brushes.size) return null;
  const n = state.ids.length;
  const mask = new Uint8Array(n).fill(1);
  for (const [name, [lo, hi]] of brushes) {
    const col = columnOf(state, name);
    for (let i = 0; i < n; i++) {
      const v = col[i];
      if (!(typeof v === "number" && v >= lo && v <= hi)) mask[i] = 0;
    }
  }
  return mask;
}

// -- the table -----------------------------------------------------------------------

function tableColumns(state) {
  // [{key, label, cap, words, fit, text(i)}]: the fixed columns, then one a param
  // (cap: the most characters a cell shows; fit: the longest text seen, see measure).
  const m = state.meta, c = state.cols;
  const text = {
    trial: (i) => String(state.ids[i]),
    status: (i) => statusName(state, i),
    step: (i) => fmt(c.step[i]), latest: (i) => fmt(c.latest[i]), best: (i) => fmt(c.best[i]),
    worker: (i) => (c.worker[i] == null ? "–" : shortWorker(m.workers[c.worker[i]] ?? c.worker[i])),
    attempts: (i) => fmt(c.attempts[i]),
  };
  const out = FIXED.map(([key, label, cap, words]) => ({ key, label, cap, words, fit: 0,
                                                         text: text[key] }));
  for (const p of m.params || []) {
    const cats = m.kinds[p] === "category" ? (m.categories[p] || []) : null;
    const col = () => state.params[p] || [];
    const cell = cats ? (i) => { const v = col()[i]; return v == null ? "–" : String(cats[v] ?? v); }
      : (i) => fmt(col()[i]);
    out.push({ key: `param:${p}`, label: p, cap: cats ? 14 : 10, words: !!cats, fit: 0, text: cell });
  }
  return out;
}

function sortKeys(state, key) {
  // One number a row (NaN: no value) to sort by.
  const n = state.ids.length;
  const out = new Float64Array(n);
  const col = key === "trial" ? state.ids
    : key.startsWith("param:") ? (state.params[key.slice(6)] || [])
      : state.cols[key] || [];
  for (let i = 0; i < n; i++) {
    const v = col[i];
    out[i] = typeof v === "number" ? v : v == null ? NaN : Number(v);
  }
  return out;
}

function sortedOrder(state, mask, key, dir) {
  // Positions of the rows passing `mask`, sorted by `key` (no value: last either way).
  const n = state.ids.length;
  const order = [];
  for (let i = 0; i < n; i++) if (!mask || mask[i]) order.push(i);
  if (key === null) return order;
  const k = sortKeys(state, key);
  order.sort((a, b) => {
    const x = k[a], y = k[b];
    if (x !== x) return y !== y ? a - b : 1;
    if (y !== y) return -1;
    return (x - y) * dir || a - b;
  });
  return order;
}

function measure(columns, positions) {
  // Widen the columns to the longest text of these rows (up to each one's cap); true if any grew.
  let grew = false;
  for (const c of columns) {
    let fit = c.fit;
    for (const i of positions) {
      const n = c.text(i).length;
      if (n > fit) fit = Math.min(n, c.cap);
    }
    if (fit > c.fit) { c.fit = fit; grew = true; }
  }
  return grew;
}

function widthChars(c) {
  // A column's width in characters: its cells' (words a little wider), or its header and arrow.
  return Math.max(c.fit + (c.words ? 1 : 0), Math.min(c.label.length, 14) + 2);
}

function makeTable(onSort, onPick) {
  const wrap = node("div", "labkit-sweep-table");
  const table = node("table");
  const colgroup = node("colgroup");
  const head = node("thead");
  const body = node("tbody");
  table.append(colgroup, head, body);
  wrap.appendChild(table);
  head.addEventListener("click", (e) => {
    const th = e.target.closest("th[data-key]");
    if (th) onSort(th.dataset.key);
  });
  body.addEventListener("click", (e) => {
    const tr = e.target.closest("tr[data-trial]");
    if (tr) onPick(tr.dataset.trial);
  });

  function header(columns, sortKey, dir) {
    colgroup.replaceChildren(...columns.map((c) => {
      const col = node("col");
      col.style.width = `calc(${widthChars(c)}ch + 7px)`;     // 7px: the cell's padding
      return col;
    }));
    const tr = node("tr");
    for (const c of columns) {
      const arrow = c.key === sortKey ? (dir > 0 ? " ▲" : " ▼") : "";
      const th = node("th", c.key === sortKey ? "labkit-sorted" : "",
                      short(c.label, widthChars(c) - 2) + arrow);
      th.dataset.key = c.key;
      th.title = `sort by ${c.label} (again: reverse)`;
      tr.appendChild(th);
    }
    head.replaceChildren(tr);
  }

  function pad(height, span) {
    const tr = node("tr", "labkit-sweep-pad");
    const td = node("td");
    td.colSpan = span;
    td.style.height = `${height}px`;
    if (!height) tr.style.display = "none";
    tr.appendChild(td);
    return tr;
  }

  function rows(state, columns, order, best, picked) {
    // Only the rows in view, plus OVERSCAN each way; pads stand for the rest.
    const top = wrap.scrollTop, seen = wrap.clientHeight || 10 * ROW_H;
    // (clamped: a brush may have left fewer rows than the box was scrolled past)
    const inView = Math.ceil(seen / ROW_H);
    const first = Math.max(0, Math.min(Math.floor(top / ROW_H), order.length - inView) - OVERSCAN);
    const last = Math.min(order.length, Math.ceil((top + seen) / ROW_H) + OVERSCAN);
    const out = [pad(first * ROW_H, columns.length)];
    for (let r = first; r < last; r++) {
      const i = order[r];
      const tr = node("tr");
      const id = String(state.ids[i]);
      const status = statusName(state, i);
      tr.dataset.trial = id;
      tr.dataset.status = status;
      if (id === best) tr.classList.add("labkit-sweep-best");
      if (id === picked) tr.classList.add("labkit-sweep-picked");
      for (const c of columns) {
        const full = c.text(i);
        const td = node("td", c.key === "status" ? `labkit-st labkit-st-${status}` : "",
                        short(full, c.cap));
        if (full.length > c.cap) td.title = full;
        tr.appendChild(td);
      }
      out.push(tr);
    }
    out.push(pad((order.length - last) * ROW_H, columns.length));
    body.replaceChildren(...out);
  }

  return { wrap, header, rows };
}

// -- canvases ------------------------------------------------------------------------

function theme(root) {
  const css = getComputedStyle(root);
  const get = (name, fallback) => css.getPropertyValue(name).trim() || fallback;
  return { ink: get("--lk-ink", "#000"), fg: get("--lk-fg", "#222"), fg2: get("--lk-fg2", "#666"),
           grid: get("--lk-grid", "#ccc"), accent: get("--lk-accent", "#1f77b4"),
           best: get("--lk-best", "#e8590c"),
           band: get("--lk-band", "#1f77b4"), font: css.fontFamily || "sans-serif" };
}

function fitCanvas(canvas, height) {
  // Size the backing store to the box times devicePixelRatio; a context in CSS px.
  const dpr = window.devicePixelRatio || 1;
  const w = Math.max(canvas.clientWidth, 1);
  canvas.style.height = `${height}px`;
  const bw = Math.round(w * dpr), bh = Math.round(height * dpr);
  if (canvas.width !== bw || canvas.height !== bh) { canvas.width = bw; canvas.height = bh; }
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, w, height);
  return { ctx, w, h: height };
}

function valueRange(values, keep) {
  // Low and high of the values, the extreme 1% each way left out beyond 200 values (a
  // diverged trial would flatten the others), but every one of `keep` (the best's) shown.
  if (!values.length) return null;
  values.sort((a, b) => a - b);
  const cut = values.length > 200 ? Math.floor(values.length * 0.01) : 0;
  let lo = values[cut], hi = values[values.length - 1 - cut];
  for (const v of keep) { if (v < lo) lo = v; if (v > hi) hi = v; }
  if (hi === lo) [lo, hi] = equalSpan(lo);
  const pad = (hi - lo) * 0.05;
  return [lo - pad, hi + pad];
}

function curveExtent(lines, band, best) {
  let x0 = Infinity, x1 = -Infinity;
  const ys = [];
  const keep = (lines.get(best) || []).map((p) => p[1]).filter(Number.isFinite);
  const see = (s, v) => {
    if (Number.isFinite(s)) { if (s < x0) x0 = s; if (s > x1) x1 = s; }
    if (Number.isFinite(v)) ys.push(v);
  };
  for (const [, pts] of lines) for (const p of pts) see(p[0], p[1]);
  if (band) band.steps.forEach((s, j) => { see(s, band.q10[j]); see(s, band.q90[j]); });
  const y = valueRange(ys, keep);
  if (!y || x0 === Infinity) return null;
  if (x1 === x0) x1 = x0 + 1;
  return { x0, x1, y0: y[0], y1: y[1] };
}

function drawAxes(ctx, box, ext, t, metric) {
  const { left, top, w, h } = box;
  ctx.strokeStyle = t.grid;
  ctx.lineWidth = 1;
  ctx.strokeRect(left + 0.5, top + 0.5, w, h);
  ctx.fillStyle = t.fg2;
  ctx.font = `10px ${t.font}`;
  ctx.textAlign = "center";
  ctx.textBaseline = "top";
  for (const s of niceTicks(ext.x0, ext.x1, 6)) ctx.fillText(fmt(s), box.X(s), top + h + 3);
  ctx.textAlign = "right";
  ctx.textBaseline = "middle";
  for (const v of niceTicks(ext.y0, ext.y1, 5)) {
    const y = box.Y(v);
    ctx.fillText(fmt(v), left - 4, y);
    ctx.globalAlpha = 0.35;
    ctx.beginPath(); ctx.moveTo(left, Math.round(y) + 0.5); ctx.lineTo(left + w, Math.round(y) + 0.5);
    ctx.stroke();
    ctx.globalAlpha = 1;
  }
  ctx.textAlign = "center";
  ctx.textBaseline = "bottom";
  ctx.fillText("step", left + w / 2, top + h + 28);
  ctx.save();
  ctx.translate(10, top + h / 2);
  ctx.rotate(-Math.PI / 2);
  ctx.textBaseline = "middle";
  ctx.fillText(short(metric || "value", 30), 0, 0);
  ctx.restore();
}

function strokeGappy(ctx, box, xs, ys) {
  // One polyline, broken where a point is not finite; returns the pieces drawn.
  let pieces = 0, open = false;
  ctx.beginPath();
  for (let j = 0; j < xs.length; j++) {
    if (!Number.isFinite(xs[j]) || !Number.isFinite(ys[j])) { open = false; continue; }
    const x = box.X(xs[j]), y = box.Y(ys[j]);
    if (open) ctx.lineTo(x, y);
    else { ctx.moveTo(x, y); open = true; pieces += 1; }
  }
  ctx.stroke();
  return pieces;
}

function fillBetween(ctx, box, steps, lo, hi) {
  // The area between two quantiles, broken where either is not finite.
  let run = [];
  const flush = () => {
    if (run.length > 1) {
      ctx.beginPath();
      run.forEach((j, k) => (k ? ctx.lineTo : ctx.moveTo).call(ctx, box.X(steps[j]), box.Y(hi[j])));
      for (let k = run.length - 1; k >= 0; k--) ctx.lineTo(box.X(steps[run[k]]), box.Y(lo[run[k]]));
      ctx.closePath();
      ctx.fill();
    }
    run = [];
  };
  for (let j = 0; j < steps.length; j++) {
    if ([steps[j], lo[j], hi[j]].every(Number.isFinite)) run.push(j); else flush();
  }
  flush();
}

function drawBand(ctx, box, band, t) {
  ctx.fillStyle = t.band;
  ctx.globalAlpha = 0.14;
  fillBetween(ctx, box, band.steps, band.q10, band.q90);
  ctx.globalAlpha = 0.22;
  fillBetween(ctx, box, band.steps, band.q25, band.q75);
  ctx.globalAlpha = 0.9;
  ctx.strokeStyle = t.band;
  ctx.lineWidth = 1.5;
  strokeGappy(ctx, box, band.steps, band.q50);
  ctx.globalAlpha = 1;
}

function lineStyle(state, id, t) {
  // [rank, colour, width, alpha]: faded first, the best last and bold.
  if (id === String(state.best)) return [3, t.best, 3, 1];
  const at = rowOf(state, id);
  const status = at === undefined ? "" : statusName(state, at);
  if (status === "running") return [2, PALETTE[Math.abs(Number(id) || 0) % PALETTE.length], 1.4, 0.95];
  if (FADED.has(status)) return [0, t.fg2, 1, 0.25];
  return [1, t.fg2, 1.1, 0.6];
}

function drawCurves(canvas, state, src, t) {
  // src: {lines: Map(id -> [[step, value]]), band}; writes what it drew on the canvas.
  const { ctx, w, h } = fitCanvas(canvas, CURVES_H);
  const ext = curveExtent(src.lines, src.band, String(state.best));
  let drawn = 0, pieces = 0, points = 0;
  if (!ext) {
    ctx.fillStyle = t.fg2;
    ctx.font = `12px ${t.font}`;
    ctx.fillText("no reports yet", 12, 24);
  } else {
    const box = { left: 52, top: 8, w: w - 60, h: h - 44 };
    box.X = (s) => box.left + ((s - ext.x0) / (ext.x1 - ext.x0)) * box.w;
    box.Y = (v) => box.top + (1 - (v - ext.y0) / (ext.y1 - ext.y0)) * box.h;
    drawAxes(ctx, box, ext, t, state.meta.metric);
    ctx.save();
    ctx.beginPath();
    ctx.rect(box.left, box.top, box.w, box.h);
    ctx.clip();
    if (src.band) drawBand(ctx, box, src.band, t);
    const styled = [...src.lines].map(([id, pts]) => [lineStyle(state, id, t), pts]);
    styled.sort((a, b) => a[0][0] - b[0][0]);
    for (const [[, colour, width, alpha], pts] of styled) {
      ctx.strokeStyle = colour;
      ctx.lineWidth = width;
      ctx.globalAlpha = alpha;
      pieces += strokeGappy(ctx, box, pts.map((p) => p[0]), pts.map((p) => p[1]));
      drawn += 1;
      points += pts.length;
    }
    ctx.restore();
  }
  canvas.dataset.lines = String(drawn);
  canvas.dataset.pieces = String(pieces);
  canvas.dataset.points = String(points);
  canvas.dataset.band = src.band ? String(src.band.n ?? "") : "";
}

function binPairs(units, a, b, rows, bins) {
  // Counts of the rows' (axis a bin, axis b bin) pairs: the density between two axes.
  const counts = new Int32Array(bins * bins);
  const ua = units[a], ub = units[b];
  for (const i of rows) {
    const x = ua[i], y = ub[i];
    if (x !== x || y !== y) continue;             // NaN: no place on an axis
    const bx = Math.min(Math.floor(x * bins), bins - 1), by = Math.min(Math.floor(y * bins), bins - 1);
    counts[bx * bins + by] += 1;
  }
  return counts;
}

function drawDensity(ctx, geo, units, rows, colour, least) {
  // Every row as a line of low alpha, accumulated: binned, a bin pair with c rows is one
  // segment as dark as c such lines on one another.  A line's alpha is set so that lines
  // spread evenly over the axis would make about half the colour; `least` keeps a few
  // lines visible among many.
  const bins = Math.max(16, Math.floor(geo.h / 2));
  const a0 = Math.min(0.6, Math.max(least, (0.7 * geo.h) / Math.max(rows.length, 1)));
  const bucket = (c) => (c <= 4 ? c : 4 + Math.ceil(Math.log2(c / 4)));
  const alpha = (b) => 1 - (1 - a0) ** (b <= 4 ? b : 4 * 2 ** (b - 4.5));
  ctx.strokeStyle = colour;
  ctx.lineWidth = 1;
  for (let a = 0; a + 1 < geo.xs.length; a++) {
    const paths = new Map();
    const counts = binPairs(units, a, a + 1, rows, bins);
    for (let k = 0; k < counts.length; k++) {
      const c = counts[k];
      if (!c) continue;
      const b = bucket(c);
      if (!paths.has(b)) paths.set(b, new Path2D());
      const path = paths.get(b);
      path.moveTo(geo.xs[a], geo.Y((Math.floor(k / bins) + 0.5) / bins));
      path.lineTo(geo.xs[a + 1], geo.Y(((k % bins) + 0.5) / bins));
    }
    for (const [b, path] of paths) {
      ctx.globalAlpha = alpha(b);
      ctx.stroke(path);
    }
  }
  ctx.globalAlpha = 1;
}

function parallelGeometry(w, h, n) {
  const left = 34, right = 34, top = 34, bottom = 18;
  const span = w - left - right;
  const xs = Array.from({ length: n }, (_, k) => left + (n > 1 ? (k * span) / (n - 1) : span / 2));
  return { xs, top, h: h - top - bottom, Y: (u) => top + (1 - u) * (h - top - bottom) };
}

function drawBestLine(ctx, geo, units, best, t) {
  ctx.strokeStyle = t.best;
  ctx.lineWidth = 2.5;
  ctx.beginPath();
  let open = false;
  units.forEach((u, a) => {
    if (Number.isNaN(u[best])) { open = false; return; }
    (open ? ctx.lineTo : ctx.moveTo).call(ctx, geo.xs[a], geo.Y(u[best]));
    open = true;
  });
  ctx.stroke();
}

function drawParallel(canvas, state, axes, mask, brushes, t) {
  // Every trial as a density, the brushed ones in colour over it, the best one bold.
  const { ctx, w, h } = fitCanvas(canvas, PARALLEL_H);
  const geo = parallelGeometry(w, h, axes.length);
  const n = state.ids.length;
  const units = axes.map((ax) => {
    const col = columnOf(state, ax.name);
    const out = new Float32Array(n);
    for (let i = 0; i < n; i++) out[i] = ax.toUnit(col[i]) ?? NaN;
    return out;
  });
  const all = Array.from({ length: n }, (_, i) => i);
  drawDensity(ctx, geo, units, all, t.ink, mask ? 0.006 : 0.01);
  if (mask) drawDensity(ctx, geo, units, all.filter((i) => mask[i]), t.accent, 0.05);
  const best = rowOf(state, state.best);
  if (best !== undefined) drawBestLine(ctx, geo, units, best, t);
  drawParallelAxes(ctx, geo, axes, brushes, t, w);
  // What each axis is and where (for a test, or a screen reader's label): canvas text is not
  // in the DOM.
  canvas.dataset.axes = JSON.stringify(axes.map((ax, a) => ({
    name: ax.name, x: geo.xs[a], label: ax.label, category: ax.category,
    ticks: ax.ticks.map((t) => t[1]) })));
  canvas.dataset.plot = JSON.stringify({ top: geo.top, bottom: geo.top + geo.h });
  return geo;
}

function drawBrush(ctx, geo, ax, x, range, t) {
  let [u0, u1] = range.map(ax.toUnit).map((u) => Math.min(Math.max(u ?? 0, 0), 1));
  if (Math.abs(geo.Y(u0) - geo.Y(u1)) < 4) { u0 -= 2 / geo.h; u1 += 2 / geo.h; }
  const top = geo.Y(Math.max(u0, u1)), height = Math.abs(geo.Y(u0) - geo.Y(u1));
  ctx.fillStyle = t.accent;
  ctx.globalAlpha = 0.35;
  ctx.fillRect(x - 6, top, 12, height);
  ctx.globalAlpha = 1;
  ctx.strokeStyle = t.fg;                 // outlined: it shows over brushed lines of its colour
  ctx.lineWidth = 1.5;
  ctx.strokeRect(x - 6, top, 12, height);
}

function textAt(ctx, text, x, y, w) {
  // `text` centred on x, kept inside the canvas.
  const width = ctx.measureText(text).width;
  ctx.textAlign = "left";
  ctx.fillText(text, Math.min(Math.max(x - width / 2, 2), w - 2 - width), y);
}

function drawParallelAxes(ctx, geo, axes, brushes, t, w) {
  // Each axis: its line, its brush, its name on top, its ends' values above and below it.
  const chars = Math.max(4, Math.floor((axes.length > 1 ? geo.xs[1] - geo.xs[0] : w) / 6.5));
  const bottom = geo.top + geo.h;
  ctx.font = `10px ${t.font}`;
  axes.forEach((ax, a) => {
    const x = Math.round(geo.xs[a]) + 0.5;
    ctx.strokeStyle = t.fg;
    ctx.lineWidth = 1;
    ctx.beginPath(); ctx.moveTo(x, geo.top); ctx.lineTo(x, bottom); ctx.stroke();
    if (brushes.has(ax.name)) drawBrush(ctx, geo, ax, x, brushes.get(ax.name), t);
    ctx.fillStyle = t.fg;
    ctx.textBaseline = "alphabetic";
    ctx.font = `600 10px ${t.font}`;
    textAt(ctx, short(ax.label, chars), x, geo.top - 16, w);
    ctx.font = `10px ${t.font}`;
    ctx.fillStyle = t.fg2;
    for (const [u, label] of ax.ticks) {
      const text = short(label, Math.min(chars, 10));
      if (u >= 1) { ctx.textBaseline = "bottom"; textAt(ctx, text, x, geo.top - 3, w); }
      else if (u <= 0) { ctx.textBaseline = "top"; textAt(ctx, text, x, bottom + 3, w); }
      else { ctx.textBaseline = "middle"; ctx.textAlign = "left"; ctx.fillText(text, x + 4, geo.Y(u)); }
    }
  });
}

// -- the board -----------------------------------------------------------------------

function layout(el) {
  const root = node("div", "labkit-sweep-board labkit-board");
  root.dataset.seq = "";
  root.dataset.rows = "0";
  const parts = {
    root,
    status: node("div", "labkit-sweep-status"),
    controls: node("div", "labkit-sweep-controls"),
    cancel: node("button", "labkit-cancel", "Cancel"),
    stop: node("button", "labkit-sweep-stop-brushed", "stop these"),
    addN: node("input", "labkit-sweep-add-n"),
    add: node("button", "labkit-sweep-add", "add trials"),
    message: node("div", "labkit-sweep-message"),
    workers: node("div", "labkit-sweep-workers"),
    plots: node("div", "labkit-sweep-plots"),
    curves: node("canvas", "labkit-sweep-curves"),
    parallel: node("canvas", "labkit-sweep-parallel"),
    hint: node("div", "labkit-sweep-hint",
               "drag on an axis to brush it, click it to clear; brushes combine"),
    detail: node("div", "labkit-sweep-detail"),
  };
  parts.addN.type = "number";
  parts.addN.min = "1";
  parts.addN.value = "10";
  parts.addN.title = "how many trials to add";
  parts.stop.disabled = true;
  parts.curves.setAttribute("aria-label", "curves: the metric by step");
  parts.parallel.setAttribute("aria-label", "parallel coordinates of the trials");
  parts.controls.append(parts.cancel, parts.stop, parts.addN, parts.add);
  const curvesBox = node("div", "labkit-sweep-plot");
  curvesBox.appendChild(parts.curves);
  const parallelBox = node("div", "labkit-sweep-plot");
  parallelBox.append(parts.parallel, parts.hint);
  parts.plots.append(curvesBox, parallelBox);
  el.appendChild(root);
  return parts;
}

function drawStatus(ui, state, shown, brushed) {
  // "name · running · 10000 trials: 40 running, ... · best: trial 17, loss 0.1 · 10000 rows"
  const parts = [];
  const add = (cls, text) => { parts.push(node("span", cls, text)); };
  const name = state.meta.name ? `${state.meta.name} · ` : "";
  add("labkit-sweep-run", `${name}${state.status || "waiting"}`);
  add("", ` · ${state.total ?? state.ids.length} trials`);
  Object.entries(state.counts || {}).filter(([, n]) => n).forEach(([s, n], k) => {
    add("", k ? ", " : ": ");
    add(`labkit-st labkit-st-${s}`, `${n} ${s}`);
  });
  const at = rowOf(state, state.best);
  if (at !== undefined) {
    const metric = state.meta.metric || "value";
    const value = fmt(state.cols.latest[at]);
    add("labkit-sweep-best-word", ` · best: trial ${state.ids[at]}, ${metric} ${value}`);
  }
  add("labkit-sweep-rows", brushed ? ` · ${shown} of ${state.ids.length} brushed`
    : ` · ${shown} rows`);
  const clock = ui.status.querySelector(".labkit-clock");      // kept until a frame brings one
  ui.status.replaceChildren(...parts, ...(clock ? [clock] : []));
}

function drawWorkers(ui, load) {
  const most = Math.max(1, ...load.map((l) => l.running || 0));
  ui.workers.replaceChildren(...load.map((l) => {
    const item = node("div", "labkit-sweep-worker");
    const name = node("span", "labkit-sweep-worker-name", short(shortWorker(l.name), 24));
    name.title = String(l.name);
    const bar = node("span", "labkit-sweep-worker-bar");
    const fill = node("span");
    fill.style.width = `${(100 * (l.running || 0)) / most}%`;
    bar.appendChild(fill);
    const rate = typeof l.per_s === "number" ? ` · ${fmt(l.per_s)}/s` : "";
    item.append(name, bar, node("span", "labkit-sweep-worker-words",
                                `${l.running ?? 0} running · ${l.done ?? 0} done${rate}`));
    return item;
  }));
}

function drawControls(ui, ended, running, brushed) {
  // After the run ended nothing acts; "stop these" only with running trials in the brush.
  ui.stop.textContent = running ? `stop these (${running})` : "stop these";
  ui.stop.title = brushed ? `stop the ${running} running trials the brush holds` : "brush an axis first";
  ui.stop.disabled = ended || running === 0;
  ui.cancel.disabled = ended;
  ui.add.disabled = ui.addN.disabled = ended;
  ui.root.dataset.ended = ended ? "1" : "0";
}

function writeClock(status, clock) {
  // A new hidden span each frame, written last: the page's watcher records each span it sees.
  const span = node("span", "labkit-clock");
  span.style.display = "none";
  const stamp = (v) => (v === null || v === undefined ? "" : String(v));
  span.dataset.oldest = stamp(clock.oldest);
  span.dataset.newest = stamp(clock.newest);
  span.dataset.events = stamp(clock.events ?? 0);
  span.dataset.drawn = stamp(clock.drawn ?? clock.sent);   // the kernel's draw is its encoding
  span.dataset.sent = stamp(clock.sent);
  status.querySelector(".labkit-clock")?.remove();
  status.appendChild(span);
}

function brushRange(axis, geo, y0, y1) {
  // [lo, hi] in the rows' units of a drag from y0 to y1 (a category's: the indexes inside).
  const u = (y) => Math.min(Math.max(1 - (y - geo.top) / geo.h, 0), 1);
  let lo = axis.fromUnit(u(Math.max(y0, y1))), hi = axis.fromUnit(u(Math.min(y0, y1)));
  if (axis.category) {               // the categories inside; none inside: the nearest one
    const mid = Math.round((lo + hi) / 2);
    lo = Math.ceil(lo - 1e-9);
    hi = Math.floor(hi + 1e-9);
    if (lo > hi) lo = hi = mid;
  }
  return [lo, hi];
}

function listenBrushes(board) {
  // Drag vertically on an axis to brush it; a click (no drag) clears it.
  const canvas = board.ui.parallel;
  let drag = null;
  const at = (e) => {
    const r = canvas.getBoundingClientRect();
    return [e.clientX - r.left, e.clientY - r.top];
  };
  const brush = () => {
    board.brushes.set(drag.axis.name, brushRange(drag.axis, board.geo, drag.y0, drag.y1));
  };
  canvas.addEventListener("pointerdown", (e) => {
    const geo = board.geo;
    if (!geo) return;
    const [x, y] = at(e);
    const a = geo.xs.findIndex((ax) => Math.abs(ax - x) <= 12);
    if (a < 0 || y < geo.top - 6 || y > geo.top + geo.h + 6) return;
    drag = { axis: board.axes[a], y0: y, y1: y, moved: false };
    canvas.setPointerCapture?.(e.pointerId);
    e.preventDefault();
  });
  canvas.addEventListener("pointermove", (e) => {
    if (!drag) return;
    drag.y1 = at(e)[1];
    if (!drag.moved && Math.abs(drag.y1 - drag.y0) < CLICK_PX) return;
    drag.moved = true;
    brush();
    board.schedule("brush");            // the table follows the drag; the kernel asked at the end
  });
  const end = (e) => {
    if (!drag) return;
    if (e.type === "pointerup") drag.y1 = at(e)[1];
    if (drag.moved || Math.abs(drag.y1 - drag.y0) >= CLICK_PX) brush();
    else board.brushes.delete(drag.axis.name);
    drag = null;
    board.sendBrush();
    board.schedule("brush");
  };
  canvas.addEventListener("pointerup", end);
  canvas.addEventListener("pointercancel", end);
}

function keptFrame(model, cache) {
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

class Board {
  // One view of a sweep: the state the frames built, what the user chose, the drawing.
  constructor(model, el) {
    this.model = model;
    this.ui = layout(el);
    this.state = emptyState();
    this.waiting = true;         // a hello is out: deltas wait for the paint answering it
    this.helloAt = 0;
    this.clock = null;           // the stamps of the frames applied since the last draw
    this.raf = 0;
    this.dirty = new Set(["all"]);
    this.columns = tableColumns(this.state);
    this.sortKey = "trial";
    this.sortDir = 1;
    this.order = [];             // the rows' positions, brushed and sorted: the table
    this.brushes = new Map();    // axis name -> [lo, hi] in the rows' own units
    this.mask = null;
    this.brushId = 0;
    this.brushed = null;         // the kernel's answer to the latest brush: {brush, lines, band}
    this.axes = [];
    this.geo = null;
    this.picked = null;          // the trial whose history is shown
    this.said = [];
    this.keptCache = { key: null, frame: null };
    this.named = null;           // a paint naming a kept frame whose parts are not all here
    this.table = makeTable((key) => this.sortBy(key), (id) => this.pick(id));
    const ui = this.ui;
    ui.root.append(ui.status, ui.controls, ui.message, ui.workers, ui.plots, this.table.wrap, ui.detail);
    this.listen();
    this.onMessage = (msg) => this.receive(msg);
    model.on("msg:custom", this.onMessage);
    this.onKept = () => this.kept();
    model.on("change:last", this.onKept);
    model.on("change:kept", this.onKept);
    this.resize = new ResizeObserver(() => this.schedule("resize"));
    this.resize.observe(ui.plots);
    // A canvas keeps the colours it was drawn in: a theme switch (JupyterLab marks it on the
    // body) redraws them.
    this.themes = new MutationObserver(() => this.schedule("resize"));
    this.themes.observe(document.body, {
      attributes: true, attributeFilter: ["data-jp-theme-name", "data-jp-theme-light", "class"] });
    this.kept();                 // a saved notebook's last frame, until a kernel answers
    this.hello();
    this.schedule("all");
  }

  close() {
    this.model.off?.("msg:custom", this.onMessage);
    this.model.off?.("change:last", this.onKept);
    this.model.off?.("change:kept", this.onKept);
    this.resize.disconnect();
    this.themes.disconnect();
    if (this.raf) cancelAnimationFrame(this.raf);
  }

  send(msg) {
    try {
      this.model.send(msg);
    } catch (err) {              // no kernel behind the model (a saved notebook): none answers
      console.debug(`labkit sweep board: ${msg.kind} not sent`, err);
    }
  }

  hello() {
    this.waiting = true;
    this.helloAt = Date.now();
    this.send({ kind: "hello" });
  }

  kept() {
    // The last frame the kernel kept once the sweep ended: drawn while no paint has answered
    // this view's hello; it names no new event, so no clock is written.  Joined from its
    // parts, it is also set as the model's "last" in this page (JupyterLab saves it).
    const frame = keptFrame(this.model, this.keptCache);
    if (frame && this.model.set && this.model.get("last") !== frame && this.model.get("kept")) {
      this.model.set("last", frame);
    }
    if (this.named) {            // a paint named it before its parts came
      const msg = this.named;
      this.named = null;
      this.receive(msg);
      return;
    }
    if (!this.waiting || !frame) return;
    this.state = emptyState();
    applyFrame(this.state, frame, true);
    this.ui.root.dataset.kept = "1";
    this.schedule("all");
  }

  schedule(...what) {
    for (const w of what) this.dirty.add(w);
    if (!this.raf) this.raf = requestAnimationFrame(() => this.draw());
  }

  receive(msg) {
    // Apply one message whole; the drawing waits for the next animation frame.
    if (!msg || typeof msg !== "object") return;
    if (msg.kind === "paint" && msg.kept !== undefined) {   // the kept frame, by name
      const frame = keptFrame(this.model, this.keptCache);
      if (!frame || this.keptCache.key !== msg.kept) { this.named = msg; return; }  // soon
      const { kept, ...rest } = msg;
      this.receive({ ...frame, ...rest });
    } else if (msg.kind === "paint") {
      this.state = emptyState();
      applyFrame(this.state, msg, true);
      this.waiting = false;
      this.ui.root.dataset.kept = "0";
      this.clock = mergeClock(this.clock, msg.clock);
      if (this.brushes.size) this.sendBrush();     // a new state: the brushed curves again
      this.schedule("all");
    } else if (msg.kind === "delta") {
      if (this.waiting || msg.base !== this.state.seq) {   // a frame lost: start again
        if (!this.waiting || Date.now() - this.helloAt > HELLO_AGAIN_MS) this.hello();
        return;
      }
      applyFrame(this.state, msg, false);
      this.clock = mergeClock(this.clock, msg.clock);
      this.schedule(msg.meta ? "all" : "frame");
    } else if (msg.kind === "curves") {
      if (msg.brush !== this.brushId || !this.brushes.size) return;   // an older brush's
      this.brushed = { brush: msg.brush, lines: new Map(Object.entries(msg.lines || {})),
                       band: msg.band ?? null };
      this.schedule("curves");
    } else if (msg.kind === "history") {
      if (String(msg.trial) === this.picked) this.showDetail(msg.html);
    } else if (msg.kind === "said") {
      this.say(String(msg.text ?? ""));
    }
  }

  say(text) {
    this.said.push(text);
    if (this.said.length > SAID_KEPT) this.said.shift();
    this.schedule("said");
  }

  listen() {
    const { ui } = this;
    listenBrushes(this);
    ui.cancel.addEventListener("click", () => this.send({ kind: "cancel" }));
    ui.stop.addEventListener("click", () => {
      const trials = this.brushedRunning();
      if (trials.length) this.send({ kind: "stop", trials });
    });
    ui.add.addEventListener("click", () => {
      const n = Number(ui.addN.value);
      if (Number.isInteger(n) && n >= 1) this.send({ kind: "add", n });
      else this.say("add: give a whole number of trials, 1 or more");
    });
    this.table.wrap.addEventListener("scroll", () => this.schedule("table"), { passive: true });
  }

  // -- sorting, brushing, picking --

  sortBy(key) {
    // At once, not at the next frame: the click's answer is the sorted rows.
    const t0 = performance.now();
    if (key === this.sortKey) this.sortDir = -this.sortDir;
    else { this.sortKey = key; this.sortDir = 1; }
    this.order = sortedOrder(this.state, this.mask, this.sortKey, this.sortDir);
    this.table.header(this.columns, this.sortKey, this.sortDir);
    this.table.rows(this.state, this.columns, this.order, this.bestId(), this.picked);
    this.ui.root.dataset.sortMs = (performance.now() - t0).toFixed(2);
  }

  pick(id) {
    this.picked = id;
    const at = rowOf(this.state, id);
    this.send({ kind: "show", trial: at === undefined ? id : this.state.ids[at] });
    this.showDetail(null);
    this.schedule("table");
  }

  showDetail(html) {
    const close = node("button", "labkit-sweep-detail-close", "×");
    close.title = "close";
    close.addEventListener("click", () => {
      this.picked = null;
      this.ui.detail.replaceChildren();
      this.schedule("table");
    });
    const body = node("div", "labkit-sweep-detail-body");
    if (html === null) body.textContent = `trial ${this.picked}: asking the kernel…`;
    else body.innerHTML = html;        // the kernel's HTML, escaped there
    this.ui.detail.replaceChildren(close, body);
  }

  sendBrush() {
    this.brushId += 1;
    this.brushed = null;
    this.send({ kind: "brush", brush: this.brushId, ranges: Object.fromEntries(this.brushes) });
  }

  brushedRunning() {
    const { mask, state } = this;
    const out = [];
    if (mask) {
      for (let i = 0; i < state.ids.length; i++) {
        if (mask[i] && statusName(state, i) === "running") out.push(state.ids[i]);
      }
    }
    return out;
  }

  curvesSource() {
    // The frames' curves; with a brush the kernel's answer, and until it comes the frames'
    // lines that pass the brush.
    const { state, mask } = this;
    if (!this.brushes.size) return state;
    if (this.brushed) return this.brushed;
    return { lines: new Map([...state.lines].filter(([id]) => mask[rowOf(state, id)])), band: null };
  }

  bestId() {
    const best = this.state.best;
    return best === null || best === undefined ? null : String(best);
  }

  // -- drawing: once an animation frame, from one state --

  draw() {
    const started = performance.now();
    const { ui, state, dirty } = this;
    this.raf = 0;
    const all = dirty.has("all"), frame = all || dirty.has("frame"), brush = dirty.has("brush");
    const t = theme(ui.root);
    if (all) this.columns = tableColumns(state);
    if (measure(this.columns, state.touched) || all) {
      this.table.header(this.columns, this.sortKey, this.sortDir);
    }
    state.touched.clear();
    if (frame || brush) {
      this.mask = passMask(state, this.brushes);
      this.order = sortedOrder(state, this.mask, this.sortKey, this.sortDir);
    }
    if (frame || brush || dirty.has("table")) {
      this.table.rows(state, this.columns, this.order, this.bestId(), this.picked);
    }
    if (frame || brush || dirty.has("curves") || dirty.has("resize")) {
      drawCurves(ui.curves, state, this.curvesSource(), t);
      ui.curves.dataset.brush = this.brushes.size && this.brushed ? String(this.brushed.brush) : "";
    }
    if (frame || brush || dirty.has("resize")) {
      this.axes = [...(state.meta.params || []), "value"].map((name) => makeAxis(state, name));
      this.geo = drawParallel(ui.parallel, state, this.axes, this.mask, this.brushes, t);
    }
    if (frame) drawWorkers(ui, state.load || []);
    if (dirty.has("said")) ui.message.replaceChildren(...this.said.map((s) => node("div", "", s)));
    if (frame || brush) {
      drawStatus(ui, state, this.order.length, !!this.mask);
      drawControls(ui, !!state.ended, this.brushedRunning().length, !!this.mask);
    }
    dirty.clear();
    ui.root.dataset.rows = String(this.order.length);
    ui.root.dataset.seq = state.seq === null ? "" : String(state.seq);
    ui.root.dataset.drawMs = (performance.now() - started).toFixed(1);
    if (this.clock) writeClock(ui.status, this.clock);   // last: the frame is on the page
    this.clock = null;
  }
}

function render({ model, el }) {
  const board = new Board(model, el);
  return () => board.close();
}

export default { render };
