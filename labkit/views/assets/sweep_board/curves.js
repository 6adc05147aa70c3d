// labkit sweep board: the curves plot: the lines the frames carry, and the band of
// quantiles over the rest.

import { equalSpan } from "./axes.js";
import { fitCanvas } from "./canvas.js";
import { rowOf, statusName } from "./state.js";
import { fmt, niceTicks, short } from "./words.js";

const CURVES_H = 220;         // px: the plots' heights
const FADED = new Set(["stopped", "failed", "cancelled"]);
const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                 "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];

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

export function drawCurves(canvas, state, src, t) {
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
