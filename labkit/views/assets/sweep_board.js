// PLACEHOLDER written by the part "board" so that labkit.views.sweep_widget imports; the
// part "page" replaces this file with the board's front-end.  It only says hello and
// shows the last frame's seq.
function render({ model, el }) {
  const root = document.createElement("div");
  root.className = "labkit-sweep-board labkit-board";
  el.appendChild(root);
  model.on("msg:custom", (msg) => {
    if (msg && (msg.kind === "paint" || msg.kind === "delta")) root.dataset.seq = String(msg.seq);
  });
  model.send({ kind: "hello" });
}
export default { render };
