// labkit sweep board: one view of a sweep, the board protocol's page side.
//
// Each message is applied whole to the state as it arrives (state.js); drawing
// waits for the next animation frame (draw.js), so however many frames arrive
// between two repaints they are drawn once, from one state.  A delta whose base is
// not the last seq applied means a frame was lost: the page says "hello" and
// ignores deltas until the paint answering it.  Brushing an axis filters the table
// here at once and asks the kernel for the curves of the brushed trials.

import { listenBrushes } from "./brush.js";
import { kernelHtml, node } from "./dom.js";
import { drawBoard } from "./draw.js";
import { layout } from "./page.js";
import { applyFrame, emptyState, keptFrame, mergeClock, rowOf, statusName } from "./state.js";
import { makeTable, sortedOrder, tableColumns } from "./table.js";

const HELLO_AGAIN_MS = 2000;  // a hello unanswered this long is sent again on the next gap
const SAID_KEPT = 4;          // lines the message area keeps

export class Board {
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
    ui.root.append(ui.status, ui.controls, ui.message, ui.workers, ui.workerCount, ui.plots,
                    this.table.wrap, ui.detail);
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
    else kernelHtml(body, html);      // the kernel's HTML, escaped there
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

  bestId() {
    const best = this.state.best;
    return best === null || best === undefined ? null : String(best);
  }

  // -- drawing: once an animation frame, from one state --

  draw() {
    drawBoard(this);
  }
}
