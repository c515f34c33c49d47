// kiln's select mode for preview pages (served by the preview proxy at /__kiln/select.js, next
// to the error reporter; never part of the project). Off until the kiln UI that holds this page
// in its frame turns it on: then hovering outlines the element under the pointer with its
// component and `file:line` (the dev server's `data-kiln-source`, see images/vite-react/
// kiln-source.mjs), a click selects it, a double-click edits its text in place.
//
// Messages go only to and from the parent window at kiln's own origin: the page is served at
// `<sandbox>.preview.<host>`, the UI at `<host>` (same scheme and port).
//   parent -> page: {type: "kiln-select-mode", on}
//   page -> parent: {type: "kiln-select-ready"} (loaded: the parent says the mode again),
//     {type: "kiln-select-mode", on: false} (Escape turned it off),
//     {type: "kiln-select", file, line, column, tag, text, component?},
//     {type: "kiln-text-edit", file, line, column, tag, old_text, new_text}.
// Nothing of the app changes while the mode is off; while on, clicks do not reach the app.
(function () {
  "use strict";
  if (window.__kilnSelect || window.parent === window) return;
  window.__kilnSelect = true;

  var MAX_TEXT = 200;
  var SOURCE = /^(.+):(\d+):(\d+)$/;
  var marker = ".preview.";
  var at = location.hostname.indexOf(marker);
  if (at < 0) return;
  var parentOrigin = location.protocol + "//" + location.hostname.slice(at + marker.length) +
    (location.port ? ":" + location.port : "");
  var on = false;
  var box = null;
  var label = null;
  var editing = null;

  function post(message) {
    try { window.parent.postMessage(message, parentOrigin); } catch (e) { /* parent gone */ }
  }

  function excerpt(text) {
    var s = String(text || "").replace(/\s+/g, " ").trim();
    return s.length > MAX_TEXT ? s.slice(0, MAX_TEXT - 1) + "\u2026" : s;
  }

  // The element's source location ({file, line, column, component?}), or null.
  function sourceOf(element) {
    var tagged = element && element.closest ? element.closest("[data-kiln-source]") : null;
    if (!tagged) return null;
    var found = SOURCE.exec(tagged.getAttribute("data-kiln-source") || "");
    if (!found) return null;
    var where = { element: tagged, file: found[1], line: +found[2], column: +found[3] };
    var component = tagged.getAttribute("data-kiln-component");
    if (component) where.component = component;
    return where;
  }

  function overlay() {
    if (box) return;
    box = document.createElement("div");
    box.setAttribute("data-kiln-overlay", "");
    box.style.cssText = "position:fixed;z-index:2147483647;pointer-events:none;" +
      "outline:2px solid #2563eb;outline-offset:-1px;background:rgba(37,99,235,.08);display:none";
    label = document.createElement("div");
    label.style.cssText = "position:absolute;left:0;bottom:100%;white-space:nowrap;" +
      "font:12px/1.4 system-ui,sans-serif;color:#fff;background:#2563eb;padding:1px 6px;" +
      "border-radius:3px 3px 0 0";
    box.appendChild(label);
    document.documentElement.appendChild(box);
  }

  function outline(element) {
    overlay();
    var where = sourceOf(element);
    var target = where ? where.element : element;
    var rect = target.getBoundingClientRect();
    box.style.display = "block";
    box.style.left = rect.left + "px";
    box.style.top = rect.top + "px";
    box.style.width = rect.width + "px";
    box.style.height = rect.height + "px";
    label.textContent = where
      ? (where.component ? where.component + " \u00b7 " : "") + where.file + ":" + where.line
      : target.tagName.toLowerCase() + " (no source location)";
    label.style.top = rect.top < 20 ? "100%" : "";
    label.style.bottom = rect.top < 20 ? "auto" : "";
  }

  function hide() {
    if (box) box.style.display = "none";
  }

  function selection(where) {
    var message = {
      type: "kiln-select", file: where.file, line: where.line, column: where.column,
      tag: where.element.tagName.toLowerCase(), text: excerpt(where.element.innerText),
    };
    if (where.component) message.component = where.component;
    return message;
  }

  function swallow(event) {
    if (!on || (editing && editing.element.contains(event.target))) return false;
    event.preventDefault();
    event.stopPropagation();
    return true;
  }

  function onMove(event) {
    if (on && !editing && event.target !== box) outline(event.target);
  }

  function onClick(event) {
    if (!swallow(event)) return;
    var where = sourceOf(event.target);
    if (where) post(selection(where));
  }

  // Double-click: the element's text becomes editable; Enter or leaving it posts the edit.
  function onDoubleClick(event) {
    if (!swallow(event)) return;
    var where = sourceOf(event.target);
    if (!where || editing) return;
    var element = where.element;
    editing = { element: element, where: where, old: element.innerText };
    hide();
    element.setAttribute("contenteditable", "plaintext-only");
    if (element.contentEditable !== "plaintext-only") element.setAttribute("contenteditable", "true");
    element.focus();
    var range = document.createRange();
    range.selectNodeContents(element);
    var chosen = window.getSelection();
    chosen.removeAllRanges();
    chosen.addRange(range);
    element.addEventListener("blur", finish, { once: true });
  }

  function finish(cancelled) {
    if (!editing) return;
    var done = editing;
    editing = null;
    done.element.removeEventListener("blur", finish);
    done.element.removeAttribute("contenteditable");
    var now = done.element.innerText;
    if (cancelled === true) {
      if (now !== done.old) done.element.innerText = done.old;
      return;
    }
    if (now === done.old) return;
    var where = done.where;
    post({
      type: "kiln-text-edit", file: where.file, line: where.line, column: where.column,
      tag: done.element.tagName.toLowerCase(), old_text: done.old, new_text: now,
    });
  }

  function onKey(event) {
    if (!on) return;
    if (editing && event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      finish(false);
    } else if (event.key === "Escape") {
      event.preventDefault();
      if (editing) finish(true);
      else { setMode(false); post({ type: "kiln-select-mode", on: false }); }
    }
  }

  function setMode(value) {
    on = !!value;
    if (!on) { finish(false); hide(); }
    document.documentElement.style.cursor = on ? "crosshair" : "";
  }

  window.addEventListener("message", function (event) {
    if (event.source !== window.parent || event.origin !== parentOrigin) return;
    var data = event.data;
    if (data && data.type === "kiln-select-mode") setMode(data.on);
  });
  window.addEventListener("mousemove", onMove, true);
  window.addEventListener("click", onClick, true);
  window.addEventListener("dblclick", onDoubleClick, true);
  ["mousedown", "mouseup", "pointerdown", "pointerup", "submit"].forEach(function (name) {
    window.addEventListener(name, swallow, true);
  });
  window.addEventListener("keydown", onKey, true);
  window.addEventListener("scroll", hide, true);
  post({ type: "kiln-select-ready" });
})();
