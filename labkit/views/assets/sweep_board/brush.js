// labkit sweep board: brushing the parallel coordinates' axes with the pointer.

const CLICK_PX = 3;           // a drag shorter than this on an axis is a click (clears it)

function brushRange(axis, geo, y0, y1) {
  // [lo, hi] in the rows' units of a drag from y0 to y1 (a category's: the indexes inside).
  const u = (y) => Math.min(Math.max(1 - (y - geo.top) / geo.h, 0), 1);
  let lo = axis.fromUnit(u(Math.max(y0, y1))), hi = axis.fromUnit(u(Math.min(y0, y1)));
  if (axis.category) {               // the categories inside; none inside: the nearest one
    const mid = Math.round((lo + hi) / 2);
    lo = Math.ceil(lo - 1e-9);
    hi = Math.floor(hi + 1e-9);
    if (lo > hi) lo = hi = mid;
  }
  return [lo, hi];
}

export function listenBrushes(board) {
  // Drag vertically on an axis to brush it; a click (no drag) clears it.
  const canvas = board.ui.parallel;
  let drag = null;
  const at = (e) => {
    const r = canvas.getBoundingClientRect();
    return [e.clientX - r.left, e.clientY - r.top];
  };
  const brush = () => {
    board.brushes.set(drag.axis.name, brushRange(drag.axis, board.geo, drag.y0, drag.y1));
  };
  canvas.addEventListener("pointerdown", (e) => {
    const geo = board.geo;
    if (!geo) return;
    const [x, y] = at(e);
    const a = geo.xs.findIndex((ax) => Math.abs(ax - x) <= 12);
    if (a < 0 || y < geo.top - 6 || y > geo.top + geo.h + 6) return;
    drag = { axis: board.axes[a], y0: y, y1: y, moved: false };
    canvas.setPointerCapture?.(e.pointerId);
    e.preventDefault();
  });
  canvas.addEventListener("pointermove", (e) => {
    if (!drag) return;
    drag.y1 = at(e)[1];
    if (!drag.moved && Math.abs(drag.y1 - drag.y0) < CLICK_PX) return;
    drag.moved = true;
    brush();
    board.schedule("brush");            // the table follows the drag; the kernel asked at the end
  });
  const end = (e) => {
    if (!drag) return;
    if (e.type === "pointerup") drag.y1 = at(e)[1];
    if (drag.moved || Math.abs(drag.y1 - drag.y0) >= CLICK_PX) brush();
    else board.brushes.delete(drag.axis.name);
    drag = null;
    board.sendBrush();
    board.schedule("brush");
  };
  canvas.addEventListener("pointerup", end);
  canvas.addEventListener("pointercancel", end);
}
