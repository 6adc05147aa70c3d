// labkit sweep board: the sweep's usable workers over time, a small step plot.
//
// The frames' "workers" part (labkit/views/sweep/workers.py): a paint holds every step
// [time, workers, threads], a delta only the new ones; "until" is when the sweep ended.
// The last step is held flat until then, or until now while the sweep runs.  A sweep
// with no steps (on this process's threads, or loaded from a store, which keeps no
// worker counts) draws no plot.

import { fitCanvas } from "./canvas.js";

const COUNT_HEIGHT = 56;   // px: a small plot under the workers' load
const COUNT_PAD = { left: 34, right: 8, top: 8, bottom: 14 };

export function mergeWorkerSteps(state, part, whole) {
  // A frame's "workers" part into the state (a paint's replaces, a delta's appends).
  if (whole) state.workerSteps = { steps: [], until: null };
  if (!part) return;
  const held = state.workerSteps;
  for (const s of part.steps || []) held.steps.push(s);
  if ("until" in part) held.until = part.until ?? null;
}

function countSpan(held, ended) {
  // [t0, t1] in seconds: from the first step to the sweep's end, or to now while it runs.
  const steps = held.steps;
  const t0 = steps[0][0], last = steps[steps.length - 1][0];
  const end = held.until ?? (ended ? last : Math.max(last, Date.now() / 1000));
  return [t0, end > t0 ? end : t0 + 1];
}

export function drawWorkerCount(canvas, state, t) {
  const held = state.workerSteps || { steps: [], until: null };
  if (!held.steps.length) {
    canvas.style.display = "none";
    canvas.dataset.steps = "";
    return;
  }
  canvas.style.display = "block";
  const { ctx, w, h } = fitCanvas(canvas, COUNT_HEIGHT);
  const [t0, t1] = countSpan(held, !!state.ended);
  const most = Math.max(1, ...held.steps.map((s) => s[1]));
  const x = (time) => COUNT_PAD.left + ((time - t0) / (t1 - t0)) * (w - COUNT_PAD.left - COUNT_PAD.right);
  const y = (n) => h - COUNT_PAD.bottom - (n / most) * (h - COUNT_PAD.top - COUNT_PAD.bottom);
  ctx.strokeStyle = t.grid;
  ctx.lineWidth = 1;
  ctx.beginPath();
  ctx.moveTo(COUNT_PAD.left, y(0));
  ctx.lineTo(w - COUNT_PAD.right, y(0));
  ctx.stroke();
  // the steps: flat until the next change, then up or down to it; the last held to the end
  const middles = [];
  ctx.strokeStyle = t.accent;
  ctx.lineWidth = 2;
  ctx.beginPath();
  held.steps.forEach(([time, n], i) => {
    const next = i + 1 < held.steps.length ? held.steps[i + 1][0] : t1;
    if (i === 0) ctx.moveTo(x(time), y(n));
    else ctx.lineTo(x(time), y(n));
    ctx.lineTo(x(next), y(n));
    middles.push([Math.round((x(time) + x(next)) / 2), Math.round(y(n))]);
  });
  ctx.stroke();
  ctx.fillStyle = t.fg2;
  ctx.font = `10px ${t.font}`;
  ctx.textBaseline = "middle";
  ctx.fillText(String(most), 4, y(most));
  ctx.fillText("0", 4, y(0));
  const now = held.steps[held.steps.length - 1];
  ctx.textBaseline = "bottom";
  ctx.fillText(`workers: ${now[1]} (${now[2]} thread${now[2] === 1 ? "" : "s"})`, COUNT_PAD.left, h);
  canvas.dataset.steps = held.steps.map((s) => s[1]).join(",");
  canvas.dataset.middles = JSON.stringify(middles);   // where each step is drawn (CSS px)
  canvas.setAttribute("aria-label", `workers over time, now ${now[1]}`);
}
