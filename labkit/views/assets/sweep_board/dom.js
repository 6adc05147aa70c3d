// labkit sweep board: the one way the board makes an element, and the one place it
// writes HTML.
//
// Every user's word (a sweep's name, a parameter's, a category's label, a worker's)
// reaches the page as text: `node` sets `textContent`, never `innerHTML`.  The only
// HTML written is the kernel's history of a trial (`kernelHtml`), escaped there
// (labkit/views/sweep/draw.py; tests/views/test_escaping.py).

export function node(tag, cls, text) {
  const n = document.createElement(tag);
  if (cls) n.className = cls;
  if (text !== undefined) n.textContent = text;
  return n;
}

export function kernelHtml(el, html) {
  // The kernel's HTML, escaped there (a trial's reports, error and reason).
  el.innerHTML = html;
}
