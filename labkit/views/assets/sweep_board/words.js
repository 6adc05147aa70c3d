// labkit sweep board: words and numbers, as the board shows them (no DOM, no state).

export function fmt(v) {
  // A number in 4 significant digits, at most 10 characters ("-1.235e-12"); null a dash.
  if (v === null || v === undefined) return "–";
  if (typeof v !== "number") return String(v);
  if (!Number.isFinite(v)) return String(v);
  if (Number.isInteger(v) && Math.abs(v) < 1e6) return String(v);
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(3).replace(/\.?0+e/, "e");
  return String(Number(v.toPrecision(4)));
}

export function short(text, n) {
  // Cut in the text itself, not by CSS, so no cell is ever wider than its box.
  text = String(text);
  return text.length <= n ? text : text.slice(0, Math.max(n - 1, 1)) + "…";
}

export function shortWorker(name) {
  // "worker 0 (this process, 2 threads)" -> "worker 0"; "tcp://10.0.0.2:4012" -> "10.0.0.2:4012"
  return String(name).replace(/^[a-z]+:\/\//, "").replace(/\s*\(.*\)$/, "");
}

export function niceTicks(lo, hi, n = 5) {
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
