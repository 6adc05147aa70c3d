// labkit sweep board: the Pareto view of a sweep of several objectives (issue 48).
//
// The frames' "pareto" part (labkit/views/sweep/pareto.py): a paint holds every
// ended trial's objectives, the front and the hypervolume over time; a delta the new
// points, the ids added to and removed from the front, the new hypervolume points.
// Drawn: two objectives (chosen) as a scatter, the front as a staircase, the brushed-out
// trials dimmed (the parallel coordinates' brush); a click on a point shows the trial,
// as a click in the table does; below, the hypervolume over the trials ended.
// A sweep of one metric has no "pareto" part: nothing of this is made.

import { fitCanvas } from "./canvas.js";
import { node } from "./dom.js";
import { fmt, niceTicks, short } from "./words.js";

const PARETO_H = 220;         // px: the scatter's height
const HV_H = 90;              // px: the hypervolume's
const PICK_PX = 8;            // a click this close to a point picks it

export function mergePareto(state, part, whole) {
  // One frame's "pareto" part into state.pareto (a paint's replaces it).
  if (whole || !state.pareto) {
    state.pareto = { names: [], modes: [], reference: null, given: false, ids: [], values: [],
                     at: new Map(), infeasible: new Set(), front: new Set(), hv: [] };
  }
  const p = state.pareto;
  for (const k of ["names", "modes", "reference", "given"]) if (k in part) p[k] = part[k];
  const points = part.points || {};
  (points.id || []).forEach((id, i) => {
    const key = String(id);
    if (!p.at.has(key)) { p.at.set(key, p.ids.length); p.ids.push(key); p.values.push(null); }
    p.values[p.at.get(key)] = points.values[i];
  });
  for (const id of points.infeasible || []) p.infeasible.add(String(id));
  if (part.front) p.front = new Set(part.front.map(String));
  for (const id of part.removed || []) p.front.delete(String(id));
  for (const id of part.added || []) p.front.add(String(id));
  if (part.hv) p.hv = whole ? part.hv.slice() : p.hv.concat(part.hv);
  if (part.hv_all) p.hv = part.hv_all.slice();
}

function paretoUi(board) {
  // The view's parts, made once the first "pareto" part came.
  if (board.paretoUi) return board.paretoUi;
  const box = node("div", "labkit-sweep-plot labkit-sweep-pareto-box");
  const pick = node("div", "labkit-sweep-pareto-pick");
  const ui = { box, x: node("select", "labkit-sweep-pareto-x"), y: node("select", "labkit-sweep-pareto-y"),
               scatter: node("canvas", "labkit-sweep-pareto"), hv: node("canvas", "labkit-sweep-hv"),
               names: "", geo: null };
  for (const c of [ui.scatter, ui.hv]) { c.style.display = "block"; c.style.width = "100%"; }
  ui.scatter.style.cursor = "pointer";
  ui.scatter.setAttribute("aria-label", "Pareto front: two objectives of the ended trials");
  ui.hv.setAttribute("aria-label", "hypervolume by trials ended");
  pick.append("x ", ui.x, " y ", ui.y);
  box.append(pick, ui.scatter, ui.hv);
  board.ui.plots.appendChild(box);
  for (const s of [ui.x, ui.y]) s.addEventListener("change", () => board.schedule("pareto"));
  ui.scatter.addEventListener("click", (e) => {
    const r = ui.scatter.getBoundingClientRect();
    const id = nearestPoint(ui.geo, e.clientX - r.left, e.clientY - r.top);
    if (id !== null) board.pick(id);
  });
  board.paretoUi = ui;
  return ui;
}

function nearestPoint(geo, x, y) {
  if (!geo) return null;
  let best = null, dist = PICK_PX * PICK_PX;
  for (const [id, px, py] of geo.drawn) {
    const d = (px - x) ** 2 + (py - y) ** 2;
    if (d <= dist) { dist = d; best = id; }
  }
  return best;
}

function fillChoices(ui, names) {
  // The objectives to choose from; the first two chosen at first.
  const key = names.join("\u0000");
  if (ui.names === key) return;
  ui.names = key;
  for (const [s, first] of [[ui.x, 0], [ui.y, 1]]) {
    s.replaceChildren(...names.map((n, i) => { const o = node("option", "", n); o.value = String(i); return o; }));
    s.value = String(first);
  }
}

function span(values) {
  let lo = Infinity, hi = -Infinity;
  for (const v of values) if (Number.isFinite(v)) { if (v < lo) lo = v; if (v > hi) hi = v; }
  if (lo === Infinity) return [0, 1];
  if (hi === lo) return [lo - 0.5, hi + 0.5];
  const pad = (hi - lo) * 0.05;
  return [lo - pad, hi + pad];
}

function staircase(p, a, b) {
  // The front's points non-dominated in objectives a and b, by a (better first).
  const sa = p.modes[a] === "max" ? -1 : 1, sb = p.modes[b] === "max" ? -1 : 1;
  const pts = [...p.front].map((id) => p.values[p.at.get(id)]).filter(Boolean)
    .map((v) => [v[a], v[b]]).sort((u, v) => sa * (u[0] - v[0]) || sb * (u[1] - v[1]));
  const out = [];
  for (const q of pts) if (!out.length || sb * q[1] < sb * out[out.length - 1][1]) out.push(q);
  return out;
}

function drawFrame(ctx, box, xs, ys, t, xName, yName) {
  const { left, top, w, h } = box;
  ctx.strokeStyle = t.grid;
  ctx.lineWidth = 1;
  ctx.strokeRect(left + 0.5, top + 0.5, w, h);
  ctx.fillStyle = t.fg2;
  ctx.font = `10px ${t.font}`;
  ctx.textAlign = "center";
  ctx.textBaseline = "top";
  for (const s of niceTicks(xs[0], xs[1], 5)) ctx.fillText(fmt(s), box.X(s), top + h + 3);
  if (xName) ctx.fillText(short(xName, 30), left + w / 2, top + h + 16);
  ctx.textAlign = "right";
  ctx.textBaseline = "middle";
  for (const v of niceTicks(ys[0], ys[1], 4)) ctx.fillText(fmt(v), left - 4, box.Y(v));
  if (yName) { ctx.textAlign = "left"; ctx.textBaseline = "top"; ctx.fillText(short(yName, 70), left + 4, 2); }
}

function plotBox(w, h, xs, ys, bottom) {
  const left = 52, top = 16, pw = Math.max(w - left - 10, 10), ph = Math.max(h - top - bottom, 10);
  return { left, top, w: pw, h: ph,
           X: (v) => left + ((v - xs[0]) / (xs[1] - xs[0])) * pw,
           Y: (v) => top + ph - ((v - ys[0]) / (ys[1] - ys[0])) * ph };
}

function drawScatter(ui, board, p, t) {
  const a = Number(ui.x.value) || 0, b = Number(ui.y.value || 1);
  const { ctx, w, h } = fitCanvas(ui.scatter, PARETO_H);
  const xs = span(p.values.map((v) => v && v[a])), ys = span(p.values.map((v) => v && v[b]));
  const box = plotBox(w, h, xs, ys, 30);
  drawFrame(ctx, box, xs, ys, t, p.names[a], p.names[b]);
  const { state, mask } = board;
  const drawn = [];
  let dimmed = 0;
  for (const pass of [true, false]) {       // the dimmed first, under the others
    for (let i = 0; i < p.ids.length; i++) {
      const v = p.values[i], id = p.ids[i];
      if (!v || !Number.isFinite(v[a]) || !Number.isFinite(v[b])) continue;
      const row = state.index.get(id);
      const out = !!mask && (row === undefined || !mask[row]);
      if (out !== pass) continue;
      if (out) dimmed += 1;
      const x = box.X(v[a]), y = box.Y(v[b]), front = p.front.has(id);
      ctx.globalAlpha = out ? 0.12 : front ? 1 : 0.55;
      ctx.fillStyle = front ? t.best : t.accent;
      if (p.infeasible.has(id)) { ctx.strokeStyle = t.fg2; ctx.strokeRect(x - 2, y - 2, 4, 4); }
      else ctx.fillRect(x - (front ? 2.5 : 1.5), y - (front ? 2.5 : 1.5), front ? 5 : 3, front ? 5 : 3);
      if (!out) drawn.push([id, x, y]);
    }
  }
  ctx.globalAlpha = 1;
  const stairs = staircase(p, a, b);
  if (stairs.length) {
    ctx.strokeStyle = t.best;
    ctx.lineWidth = 1.5;
    ctx.beginPath();
    stairs.forEach(([x, y], i) => {
      if (i) ctx.lineTo(box.X(x), box.Y(stairs[i - 1][1]));
      (i ? ctx.lineTo : ctx.moveTo).call(ctx, box.X(x), box.Y(y));
    });
    ctx.stroke();
  }
  ui.geo = { drawn };
  Object.assign(ui.scatter.dataset, { points: String(drawn.length + dimmed), dimmed: String(dimmed),
                                      front: String(p.front.size), stairs: String(stairs.length),
                                      x: p.names[a] || "", y: p.names[b] || "",
                                      frontAt: JSON.stringify(drawn.filter(([id]) => p.front.has(id))
                                        .map(([id, x, y]) => [id, Math.round(x), Math.round(y)])) });
}

function drawHypervolume(ui, p, t) {
  const { ctx, w, h } = fitCanvas(ui.hv, HV_H);
  const hv = p.hv.filter((q) => Number.isFinite(q[1]));
  ui.hv.dataset.points = String(hv.length);
  ui.hv.dataset.last = hv.length ? String(hv[hv.length - 1][1]) : "";
  if (!hv.length) return;
  const xs = span(hv.map((q) => q[0])), ys = span(hv.map((q) => q[1]));
  const box = plotBox(w, h, xs, ys, 18);
  const ref = p.reference ? ` · reference ${p.reference.map(fmt).join(", ")}` : "";
  drawFrame(ctx, box, xs, ys, t, "", `hypervolume by trials ended${ref}`);
  ctx.strokeStyle = t.accent;
  ctx.lineWidth = 1.5;
  ctx.beginPath();
  hv.forEach(([n, v], i) => (i ? ctx.lineTo : ctx.moveTo).call(ctx, box.X(n), box.Y(v)));
  ctx.stroke();
}

export function drawPareto(board, t) {
  // The Pareto view from the state (nothing for a sweep of one metric).
  const p = board.state.pareto;
  if (!p || p.names.length < 2) {
    if (board.paretoUi) { board.paretoUi.box.remove(); board.paretoUi = null; }
    return;
  }
  const ui = paretoUi(board);
  fillChoices(ui, p.names);
  drawScatter(ui, board, p, t);
  drawHypervolume(ui, p, t);
}
