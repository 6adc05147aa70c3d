// labkit sweep board: the parallel coordinates' axes (a param or the metric's value,
// on 0..1) and the rows a brush on them lets through.

import { fmt } from "./words.js";

export function columnOf(state, name) {
  // An axis's cells: a param's, or for "value" the metric's latest (final, once ended), as
  // the kernel's brush reads it.
  return name === "value" ? state.cols.latest : (state.params[name] || []);
}

export function equalSpan(v) {
  // [lo, hi] of an axis whose every value is v: v ± 5% of |v|, or 0..0.5 for 0 (and -0.5..0
  // never: an axis of zeros holds no negative value), so no value the sweep cannot have shows.
  if (v === 0) return [0, 0.5];
  const d = Math.abs(v) * 0.05;
  return [v - d, v + d];
}

export function makeAxis(state, name) {
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

export function passMask(state, brushes) {
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
