// A tiny element builder: h("div", {class: "x", onclick: f}, "text", child).

/** Create an element with attributes (`on*` become listeners) and children (strings or nodes). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (name === "class") el.className = value;
    else if (name === "dataset") Object.assign(el.dataset, value);
    else el.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

/** Whether a scroll container is (nearly) at its bottom. */
export function nearBottom(el, slack = 60) {
  return el.scrollTop + el.clientHeight >= el.scrollHeight - slack;
}
