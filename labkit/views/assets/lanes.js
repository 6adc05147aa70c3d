// labkit task lanes: one lane per worker, one block per finished task.
//
// Plain ESM for anywidget, no build step and no imports.  Spans arrive as
// custom messages {kind: "spans", spans: [...]} holding only new spans; the
// synced `recent` list seeds a first render, and a new view says "hello" to be
// sent the recent spans again.  A view may see a later span before that
// resend, so it remembers the `seq` of every span it drew and skips repeats.
// At most MAX_BLOCKS blocks stay in the DOM; the oldest go first.
// Times are seconds from `t0`; the SVG's viewBox is in seconds, so a growing
// run only changes the viewBox, never the blocks already drawn.

const SVG = "http://www.w3.org/2000/svg";
const MAX_BLOCKS = 5000;
// Past this many tasks a lane is drawn as its busy fraction over time (BINS columns a
// lane, each as dark as the share of its time spent in tasks), not a block per task.
const DENSE_AFTER = 400;
const BINS = 120;

function svgEl(name, attrs) {
  const node = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
  return node;
}

function shortName(worker) {
  // "tcp://127.0.0.1:40123" -> "127.0.0.1:40123"
  return String(worker).replace(/^[a-z]+:\/\//, "");
}

function render({ model, el }) {
  const root = document.createElement("div");
  root.className = "labkit-lanes";
  root.dataset.spans = "0";
  const title = document.createElement("div");
  title.className = "labkit-lanes-title";
  const body = document.createElement("div");
  body.className = "labkit-lanes-body";
  const names = document.createElement("div");
  names.className = "labkit-lanes-names";
  const plot = document.createElement("div");
  plot.className = "labkit-lanes-plot";
  const svg = svgEl("svg", { preserveAspectRatio: "none", class: "labkit-lanes-svg" });
  const axis = document.createElement("div");
  axis.className = "labkit-lanes-axis";
  const legend = document.createElement("div");
  legend.className = "labkit-lanes-legend";
  plot.append(svg, axis);
  body.append(names, plot);
  root.append(title, body, legend);
  el.appendChild(root);
  const dense = svgEl("g", { class: "labkit-lanes-dense" });
  svg.appendChild(dense);
  const spans = [];          // the spans drawn, for the dense view

  let nLanes = 0;            // lanes drawn: lane i is worker model.get("workers")[i]
  const seen = new Set();    // seq of every span drawn
  const blocks = [];         // the rects in the DOM, oldest first
  let drawn = 0;
  let tEnd = 0.001;          // seconds covered by the x axis

  function addLanes(upTo) {
    const workers = model.get("workers") || [];
    const shown = model.get("labels") || [];
    while (nLanes <= upTo) {
      const worker = workers[nLanes] ?? `worker ${nLanes}`;
      const label = document.createElement("div");
      label.className = "labkit-lanes-name";
      label.textContent = shown[nLanes] || shortName(worker);
      label.title = String(worker);
      names.appendChild(label);
      nLanes += 1;
    }
  }

  function layout() {
    const h = model.get("lane_height");
    const n = Math.max(nLanes, 1);
    svg.setAttribute("viewBox", `0 0 ${tEnd} ${n}`);
    svg.style.height = `${n * h}px`;
    names.style.gridAutoRows = `${h}px`;
    axis.innerHTML = "";
    const left = document.createElement("span");
    left.textContent = "0 s";
    const right = document.createElement("span");
    right.textContent = `${tEnd.toFixed(tEnd < 10 ? 2 : 1)} s since the first task`;
    axis.append(left, right);
    const isDense = drawn > DENSE_AFTER;
    title.textContent = `${model.get("title")} · ${drawn} tasks` +
      (isDense ? " · shaded by the share of time busy" : "");
    root.dataset.dense = isDense ? "1" : "0";
    if (isDense) drawDense();
  }

  function drawDense() {
    // Each lane in BINS columns: the darker, the more of that time its tasks ran.
    for (const b of blocks) b.style.display = "none";
    dense.replaceChildren();
    const width = tEnd / BINS;
    const busy = Array.from({ length: Math.max(nLanes, 1) }, () => new Float64Array(BINS));
    const colour = Array.from({ length: Math.max(nLanes, 1) }, () => new Array(BINS));
    for (const s of spans) {
      const lane = s.lane | 0;
      if (lane >= busy.length) continue;
      let b = Math.max(0, Math.floor(s.start / width));
      for (; b < BINS && b * width < s.end; b++) {
        const overlap = Math.min(s.end, (b + 1) * width) - Math.max(s.start, b * width);
        if (overlap > 0) {
          busy[lane][b] += overlap;
          if (!colour[lane][b] || s.ok === false) colour[lane][b] = s.ok === false ? "#d62728" : s.color;
        }
      }
    }
    busy.forEach((bins, lane) => bins.forEach((t, b) => {
      if (t <= 0) return;
      dense.appendChild(svgEl("rect", {
        x: b * width, y: lane + 0.1, width: width, height: 0.8,
        fill: colour[lane][b] || "#1f77b4", "fill-opacity": Math.min(1, 0.15 + t / width),
      }));
    }));
  }

  function drawLegend() {
    legend.replaceChildren();
    for (const item of model.get("legend") || []) {
      const entry = document.createElement("span");
      entry.className = "labkit-lanes-key";
      const swatch = document.createElement("span");
      swatch.className = "labkit-lanes-swatch";
      swatch.style.background = item.color;
      swatch.style.opacity = String(item.alpha ?? 0.9);
      entry.append(swatch, document.createTextNode(item.label || ""));
      legend.appendChild(entry);
    }
  }

  function draw(spans) {
    let added = 0;
    for (const s of spans || []) {
      if (seen.has(s.seq)) continue;       // drawn already (a resend, or a second copy)
      seen.add(s.seq);
      const lane = s.lane | 0;
      addLanes(lane);
      const width = Math.max(s.end - s.start, 0);
      const worker = (model.get("workers") || [])[lane] ?? "";
      const rect = svgEl("rect", {
        x: s.start, y: lane + 0.1, width: width, height: 0.8,
        fill: s.color || "#1f77b4",
        "fill-opacity": s.alpha ?? 0.9,
        class: s.ok === false ? "labkit-span failed" : "labkit-span",
      });
      const tip = svgEl("title");
      tip.textContent = `${s.label || "task"}: ${width.toFixed(3)} s on ${shortName(worker)}` +
        (s.ok === false ? " (failed)" : "");
      rect.appendChild(tip);
      svg.appendChild(rect);
      blocks.push(rect);
      spans.push(s);
      if (blocks.length > MAX_BLOCKS) { blocks.shift().remove(); spans.shift(); }
      tEnd = Math.max(tEnd, s.end);
      added += 1;
    }
    if (added) {
      drawn += added;
      root.dataset.spans = String(drawn);
      layout();
    }
  }

  addLanes((model.get("workers") || []).length - 1);
  draw(model.get("recent"));
  drawLegend();
  layout();

  const onCustom = (msg) => { if (msg && msg.kind === "spans") draw(msg.spans); };
  const onWorkers = () => { addLanes((model.get("workers") || []).length - 1); layout(); };
  const onLabels = () => {   // a worker's name can arrive after its lane (asked of the cluster)
    const shown = model.get("labels") || [];
    const workers = model.get("workers") || [];
    [...names.children].forEach((el, i) => {
      el.textContent = shown[i] || shortName(workers[i] ?? `worker ${i}`);
    });
  };
  const onRecent = () => draw(model.get("recent"));
  model.on("msg:custom", onCustom);
  model.on("change:workers", onWorkers);
  model.on("change:labels", onLabels);
  model.on("change:recent", onRecent);
  model.on("change:lane_height", layout);
  model.on("change:legend", drawLegend);
  model.send({ kind: "hello", seen: seen.size });   // spans sent before this view existed

  return () => {
    model.off("msg:custom", onCustom);
    model.off("change:workers", onWorkers);
    model.off("change:labels", onLabels);
    model.off("change:recent", onRecent);
    model.off("change:lane_height", layout);
    model.off("change:legend", drawLegend);
  };
}

export default { render };
