// labkit sweep board: drawing a board, once an animation frame, from one state.
//
// However many frames arrived since the last draw, the status line, table and plots
// are drawn once, from the state they built, and never disagree.  What changed since
// (`board.dirty`) says which parts are drawn again.

import { makeAxis, passMask } from "./axes.js";
import { theme } from "./canvas.js";
import { drawCurves } from "./curves.js";
import { node } from "./dom.js";
import { drawControls, drawStatus, drawWorkers, writeClock } from "./page.js";
import { drawParallel } from "./parallel.js";
import { drawPareto } from "./pareto.js";
import { rowOf } from "./state.js";
import { measure, sortedOrder, tableColumns } from "./table.js";
import { drawWorkerCount } from "./workers.js";

function curvesSource(board) {
  // The frames' curves; with a brush the kernel's answer, and until it comes the frames'
  // lines that pass the brush.
  const { state, mask } = board;
  if (!board.brushes.size) return state;
  if (board.brushed) return board.brushed;
  return { lines: new Map([...state.lines].filter(([id]) => mask[rowOf(state, id)])), band: null };
}

export function drawBoard(board) {
  const started = performance.now();
  const { ui, state, dirty } = board;
  board.raf = 0;
  const all = dirty.has("all"), frame = all || dirty.has("frame"), brush = dirty.has("brush");
  const t = theme(ui.root);
  if (all) board.columns = tableColumns(state);
  if (measure(board.columns, state.touched) || all) {
    board.table.header(board.columns, board.sortKey, board.sortDir);
  }
  state.touched.clear();
  if (frame || brush) {
    board.mask = passMask(state, board.brushes);
    board.order = sortedOrder(state, board.mask, board.sortKey, board.sortDir);
  }
  if (frame || brush || dirty.has("table")) {
    board.table.rows(state, board.columns, board.order, board.bestId(), board.picked);
  }
  if (frame || brush || dirty.has("curves") || dirty.has("resize")) {
    drawCurves(ui.curves, state, curvesSource(board), t);
    ui.curves.dataset.brush = board.brushes.size && board.brushed ? String(board.brushed.brush) : "";
  }
  if (frame || brush || dirty.has("resize")) {
    board.axes = [...(state.meta.params || []), "value"].map((name) => makeAxis(state, name));
    board.geo = drawParallel(ui.parallel, state, board.axes, board.mask, board.brushes, t);
  }
  if (frame || brush || dirty.has("resize") || dirty.has("pareto")) drawPareto(board, t);
  if (frame) drawWorkers(ui, state.load || []);
  if (frame || dirty.has("resize")) drawWorkerCount(ui.workerCount, state, t);
  if (dirty.has("said")) ui.message.replaceChildren(...board.said.map((s) => node("div", "", s)));
  if (frame || brush) {
    drawStatus(ui, state, board.order.length, !!board.mask);
    drawControls(ui, !!state.ended, board.brushedRunning().length, !!board.mask);
  }
  dirty.clear();
  ui.root.dataset.rows = String(board.order.length);
  ui.root.dataset.seq = state.seq === null ? "" : String(state.seq);
  ui.root.dataset.drawMs = (performance.now() - started).toFixed(1);
  if (board.clock) writeClock(ui.status, board.clock);   // last: the frame is on the page
  board.clock = null;
}
