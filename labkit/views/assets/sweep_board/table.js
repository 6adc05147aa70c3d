// labkit sweep board: the table, sorted and brushed, virtualized.
//
// The table is a list of row positions (`order`); only the rows in view (plus
// OVERSCAN each way) exist in the DOM, pads stand for the rest.

import { node } from "./dom.js";
import { statusName } from "./state.js";
import { fmt, short, shortWorker } from "./words.js";

const ROW_H = 20;             // px: the table's fixed row height (the CSS agrees)
const OVERSCAN = 6;           // rows drawn beyond the view, each way
// The table's fixed columns: key, header, the most characters a cell shows (a number
// takes at most 10, see fmt), and whether it holds words (a little wider than digits).
const FIXED = [["trial", "trial", 12, false], ["status", "status", 10, true],
               ["step", "step", 8, false], ["latest", "latest", 10, false],
               ["best", "best", 10, false], ["worker", "worker", 15, true],
               ["attempts", "attempts", 4, false]];

function markMoved(tr, td, moves) {
  // A trial whose worker left under it (it went on elsewhere): "moved ×n" beside its status.
  if (!moves) return;
  tr.dataset.moves = String(moves);
  td.appendChild(node("span", "labkit-sweep-moved", ` moved ×${moves}`));
  td.title = `${td.title || td.textContent} (its worker left ${moves}× and it went on elsewhere)`;
}

export function tableColumns(state) {
  // [{key, label, cap, words, fit, text(i)}]: the fixed columns, then one a param
  // (cap: the most characters a cell shows; fit: the longest text seen, see measure).
  const m = state.meta, c = state.cols;
  const text = {
    trial: (i) => String(state.ids[i]),
    status: (i) => statusName(state, i),
    step: (i) => fmt(c.step[i]), latest: (i) => fmt(c.latest[i]), best: (i) => fmt(c.best[i]),
    worker: (i) => (c.worker[i] == null ? "–" : shortWorker(m.workers[c.worker[i]] ?? c.worker[i])),
    attempts: (i) => fmt(c.attempts[i]),
  };
  const out = FIXED.map(([key, label, cap, words]) => ({ key, label, cap, words, fit: 0,
                                                         text: text[key] }));
  for (const p of m.params || []) {
    const cats = m.kinds[p] === "category" ? (m.categories[p] || []) : null;
    const col = () => state.params[p] || [];
    const cell = cats ? (i) => { const v = col()[i]; return v == null ? "–" : String(cats[v] ?? v); }
      : (i) => fmt(col()[i]);
    out.push({ key: `param:${p}`, label: p, cap: cats ? 14 : 10, words: !!cats, fit: 0, text: cell });
  }
  return out;
}

function sortKeys(state, key) {
  // One number a row (NaN: no value) to sort by.
  const n = state.ids.length;
  const out = new Float64Array(n);
  const col = key === "trial" ? state.ids
    : key.startsWith("param:") ? (state.params[key.slice(6)] || [])
      : state.cols[key] || [];
  for (let i = 0; i < n; i++) {
    const v = col[i];
    out[i] = typeof v === "number" ? v : v == null ? NaN : Number(v);
  }
  return out;
}

export function sortedOrder(state, mask, key, dir) {
  // Positions of the rows passing `mask`, sorted by `key` (no value: last either way).
  const n = state.ids.length;
  const order = [];
  for (let i = 0; i < n; i++) if (!mask || mask[i]) order.push(i);
  if (key === null) return order;
  const k = sortKeys(state, key);
  order.sort((a, b) => {
    const x = k[a], y = k[b];
    if (x !== x) return y !== y ? a - b : 1;
    if (y !== y) return -1;
    return (x - y) * dir || a - b;
  });
  return order;
}

export function measure(columns, positions) {
  // Widen the columns to the longest text of these rows (up to each one's cap); true if any grew.
  let grew = false;
  for (const c of columns) {
    let fit = c.fit;
    for (const i of positions) {
      const n = c.text(i).length;
      if (n > fit) fit = Math.min(n, c.cap);
    }
    if (fit > c.fit) { c.fit = fit; grew = true; }
  }
  return grew;
}

function widthChars(c) {
  // A column's width in characters: its cells' (words a little wider), or its header and arrow.
  return Math.max(c.fit + (c.words ? 1 : 0), Math.min(c.label.length, 14) + 2);
}

export function makeTable(onSort, onPick) {
  const wrap = node("div", "labkit-sweep-table");
  const table = node("table");
  const colgroup = node("colgroup");
  const head = node("thead");
  const body = node("tbody");
  table.append(colgroup, head, body);
  wrap.appendChild(table);
  head.addEventListener("click", (e) => {
    const th = e.target.closest("th[data-key]");
    if (th) onSort(th.dataset.key);
  });
  body.addEventListener("click", (e) => {
    const tr = e.target.closest("tr[data-trial]");
    if (tr) onPick(tr.dataset.trial);
  });

  function header(columns, sortKey, dir) {
    colgroup.replaceChildren(...columns.map((c) => {
      const col = node("col");
      col.style.width = `calc(${widthChars(c)}ch + 7px)`;     // 7px: the cell's padding
      return col;
    }));
    const tr = node("tr");
    for (const c of columns) {
      const arrow = c.key === sortKey ? (dir > 0 ? " ▲" : " ▼") : "";
      const th = node("th", c.key === sortKey ? "labkit-sorted" : "",
                      short(c.label, widthChars(c) - 2) + arrow);
      th.dataset.key = c.key;
      th.title = `sort by ${c.label} (again: reverse)`;
      tr.appendChild(th);
    }
    head.replaceChildren(tr);
  }

  function pad(height, span) {
    const tr = node("tr", "labkit-sweep-pad");
    const td = node("td");
    td.colSpan = span;
    td.style.height = `${height}px`;
    if (!height) tr.style.display = "none";
    tr.appendChild(td);
    return tr;
  }

  function rows(state, columns, order, best, picked) {
    // Only the rows in view, plus OVERSCAN each way; pads stand for the rest.
    const top = wrap.scrollTop, seen = wrap.clientHeight || 10 * ROW_H;
    // (clamped: a brush may have left fewer rows than the box was scrolled past)
    const inView = Math.ceil(seen / ROW_H);
    const first = Math.max(0, Math.min(Math.floor(top / ROW_H), order.length - inView) - OVERSCAN);
    const last = Math.min(order.length, Math.ceil((top + seen) / ROW_H) + OVERSCAN);
    const out = [pad(first * ROW_H, columns.length)];
    for (let r = first; r < last; r++) {
      const i = order[r];
      const tr = node("tr");
      const id = String(state.ids[i]);
      const status = statusName(state, i);
      tr.dataset.trial = id;
      tr.dataset.status = status;
      if (id === best) tr.classList.add("labkit-sweep-best");
      if (id === picked) tr.classList.add("labkit-sweep-picked");
      for (const c of columns) {
        const full = c.text(i);
        const td = node("td", c.key === "status" ? `labkit-st labkit-st-${status}` : "",
                        short(full, c.cap));
        if (full.length > c.cap) td.title = full;
        if (c.key === "status") markMoved(tr, td, state.cols.moves?.[i]);
        tr.appendChild(td);
      }
      out.push(tr);
    }
    out.push(pad((order.length - last) * ROW_H, columns.length));
    body.replaceChildren(...out);
  }

  return { wrap, header, rows };
}
