// labkit sweep board: the page's parts (layout) and the words drawn into them: the
// status line, the workers' load, the controls and the frames' clock.

import { node } from "./dom.js";
import { rowOf } from "./state.js";
import { fmt, short, shortWorker } from "./words.js";

export function layout(el) {
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
    workerCount: node("canvas", "labkit-sweep-worker-count"),
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
  parts.workerCount.setAttribute("aria-label", "workers over time");
  parts.workerCount.style.width = "100%";
  parts.workerCount.style.display = "none";   // until a frame brings a step (workers.js)
  parts.controls.append(parts.cancel, parts.stop, parts.addN, parts.add);
  const curvesBox = node("div", "labkit-sweep-plot");
  curvesBox.appendChild(parts.curves);
  const parallelBox = node("div", "labkit-sweep-plot");
  parallelBox.append(parts.parallel, parts.hint);
  parts.plots.append(curvesBox, parallelBox);
  el.appendChild(root);
  return parts;
}

export function drawStatus(ui, state, shown, brushed) {
  // "name · running · 10000 trials: 40 running, ... · best: trial 17, loss 0.1 · 10000 rows"
  const parts = [];
  const add = (cls, text) => { parts.push(node("span", cls, text)); };
  const name = state.meta.name ? `${state.meta.name} · ` : "";
  add("labkit-sweep-run", `${name}${state.status || "waiting"}`);
  if (state.waiting && !state.ended) add("labkit-sweep-waiting", " · waiting for workers");
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

export function drawWorkers(ui, load) {
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

export function drawControls(ui, ended, running, brushed) {
  // After the run ended nothing acts; "stop these" only with running trials in the brush.
  ui.stop.textContent = running ? `stop these (${running})` : "stop these";
  ui.stop.title = brushed ? `stop the ${running} running trials the brush holds` : "brush an axis first";
  ui.stop.disabled = ended || running === 0;
  ui.cancel.disabled = ended;
  ui.add.disabled = ui.addN.disabled = ended;
  ui.root.dataset.ended = ended ? "1" : "0";
}

export function writeClock(status, clock) {
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
