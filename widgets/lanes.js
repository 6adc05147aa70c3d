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
  plot.append(svg, axis);
  body.append(names, plot);
  root.append(title, body);
  el.appendChild(root);

  let nLanes = 0;            // lanes drawn: lane i is worker model.get("workers")[i]
  const seen = new Set();    // seq of every span drawn
  const blocks = [];         // the rects in the DOM, oldest first
  let drawn = 0;
  let tEnd = 0.001;          // seconds covered by the x axis

  function addLanes(upTo) {
    const workers = model.get("workers") || [];
    while (nLanes <= upTo) {
      const worker = workers[nLanes] ?? `worker ${nLanes}`;
      const label = document.createElement("div");
      label.className = "labkit-lanes-name";
      label.textContent = shortName(worker);
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
    axis.textContent = `0 … ${tEnd.toFixed(tEnd < 10 ? 2 : 1)} s`;
    title.textContent = `${model.get("title")} · ${drawn} tasks`;
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
      if (blocks.length > MAX_BLOCKS) blocks.shift().remove();
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
  layout();

  const onCustom = (msg) => { if (msg && msg.kind === "spans") draw(msg.spans); };
  const onWorkers = () => { addLanes((model.get("workers") || []).length - 1); layout(); };
  const onRecent = () => draw(model.get("recent"));
  model.on("msg:custom", onCustom);
  model.on("change:workers", onWorkers);
  model.on("change:recent", onRecent);
  model.on("change:lane_height", layout);
  model.send({ kind: "hello", seen: seen.size });   // spans sent before this view existed

  return () => {
    model.off("msg:custom", onCustom);
    model.off("change:workers", onWorkers);
    model.off("change:recent", onRecent);
    model.off("change:lane_height", layout);
  };
}

export default { render };
