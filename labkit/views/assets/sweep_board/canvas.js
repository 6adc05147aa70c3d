// labkit sweep board: what both plots' canvases share: the theme's colours, the size.

export function theme(root) {
  const css = getComputedStyle(root);
  const get = (name, fallback) => css.getPropertyValue(name).trim() || fallback;
  return { ink: get("--lk-ink", "#000"), fg: get("--lk-fg", "#222"), fg2: get("--lk-fg2", "#666"),
           grid: get("--lk-grid", "#ccc"), accent: get("--lk-accent", "#1f77b4"),
           best: get("--lk-best", "#e8590c"),
           band: get("--lk-band", "#1f77b4"), font: css.fontFamily || "sans-serif" };
}

export function fitCanvas(canvas, height) {
  // Size the backing store to the box times devicePixelRatio; a context in CSS px.
  const dpr = window.devicePixelRatio || 1;
  const w = Math.max(canvas.clientWidth, 1);
  canvas.style.height = `${height}px`;
  const bw = Math.round(w * dpr), bh = Math.round(height * dpr);
  if (canvas.width !== bw || canvas.height !== bh) { canvas.width = bw; canvas.height = bh; }
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, w, height);
  return { ctx, w, h: height };
}
