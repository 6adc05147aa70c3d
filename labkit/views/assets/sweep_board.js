// labkit sweep board: the notebook's live view of a sweep, drawn from frames.
//
// Plain ES modules, no build step: this entry and the modules of sweep_board/,
// one concern each:
//
//   words.js     numbers and words as the board shows them
//   dom.js       the one way an element is made (text as text), the one HTML write
//   state.js     the state the frames build: paint, delta, the kept frame
//   axes.js      the parallel coordinates' axes, and the rows a brush lets through
//   table.js     the table, sorted and brushed, virtualized
//   canvas.js    the plots' theme and canvas size
//   curves.js    the curves plot: lines and the band of quantiles
//   parallel.js  the parallel coordinates, drawn as a density
//   brush.js     brushing an axis with the pointer
//   page.js      the page's parts: status line, workers, controls, clock
//   draw.js      drawing the board once an animation frame, from one state
//   board.js     one view of a sweep: the board protocol, the user's choices
//
// A page served over HTTP imports this file and the browser loads the modules.
// anywidget's _esm is one text (JupyterLab runs it from a blob: URL, where a
// relative import has nothing to resolve against), so the widget runs the
// modules joined into one by labkit/views/sweep/esm.py, by the rule written there:
// each import one line `import { a, b } from "./x.js";`, `export` only before a
// top-level function, const or class, and top-level names unique across modules.

import { Board } from "./sweep_board/board.js";

function render({ model, el }) {
  const board = new Board(model, el);
  return () => board.close();
}

export default { render };
