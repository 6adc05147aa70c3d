// labkit sweep board: the parallel coordinates: every trial as a density (2-D bins
// between neighbouring axes, so the cost is the bins', not the trials'), the brushed
// ones in colour over it, the best one bold.

import { columnOf } from "./axes.js";
import { fitCanvas } from "./canvas.js";
import { rowOf } from "./state.js";
import { short } from "./words.js";

const PARALLEL_H = 210;

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

export function drawParallel(canvas, state, axes, mask, brushes, t) {
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
