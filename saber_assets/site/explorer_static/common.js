// What every explorer page draws with: elements, the site's own rendered markup, numbers and
// select boxes. Loaded before a page's own script (window.SaberUI). No network.
"use strict";
window.SaberUI = (function () {
  const el = (tag, attrs, ...kids) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v; else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v);
    }
    for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(k == null ? "" : String(k)));
    return e;
  };
  // Markup the site's own renderer made (math_html.render: prose escaped, formulas as sanitised
  // MathML); nothing else is ever given to innerHTML.
  const rendered = (markup, cls = "rendered") => { const d = el("div", { class: cls }); d.innerHTML = markup; return d; };
  const fmt = (v, d = 4) => (typeof v === "number" ? v.toFixed(d) : v == null ? "" : String(v));
  const select = (label, id, options, value, onchange) => {
    const s = el("select", { id, onchange });
    for (const [v, text] of options) {
      const o = el("option", { value: v }, text);
      if (v === value) o.selected = true;
      s.append(o);
    }
    return el("label", { for: id }, label + " ", s);
  };
  // a table's header row of plain labels
  const head = (labels) => el("thead", {}, el("tr", {}, ...labels.map((h) => el("th", { scope: "col" }, h))));
  return { el, rendered, fmt, select, head };
})();
