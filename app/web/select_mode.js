// Select mode (issue 26): point at an element of the preview and talk about it.
//
// The Select button in the preview bar turns the mode on in the page (the preview proxy's
// /__kiln/select.js, sandbox/preview/select.js): hovering outlines an element with its component
// and `file:line`, a click selects it. Each selection becomes a chip above the composer (tag,
// text excerpt, `file:line`; removable; several allowed) and goes with the next message as
// `selection` (POST /api/chats/{id}/messages). A double-click edits the element's text in place
// in the page; the edit comes here as `kiln-text-edit` and goes to `onTextEdit` (without a
// handler of its own, the element is selected and the composer asks for the change in words).
//
// Messages are taken only from the preview frame's window at the preview's origin, and sent
// only to that origin; the page checks ours the same way.

import { h } from "./dom.js";

const MAX_SELECTED = 8; // what the server takes per message
const EXCERPT = 40; // characters of an element's text on its chip

/** The chip of one selected element; with `onRemove`, a button removes it. */
export function selectionChip(item, onRemove = null) {
  const text = item.text.length > EXCERPT ? `${item.text.slice(0, EXCERPT - 1)}…` : item.text;
  const where = `${item.file}:${item.line}`;
  const remove = onRemove && h("button", {
    type: "button", class: "chip-remove", "aria-label": `Remove the selection ${where}`, onclick: onRemove,
  }, "×");
  return h("span", { class: "chip selection-chip", title: `${item.component ? `${item.component} · ` : ""}${where}` },
    h("span", { class: "chip-tag" }, `<${item.tag}>`), text ? ` ${text} ` : " ",
    h("span", { class: "chip-where" }, where), remove);
}

/** The chips of a message's kept selection (its `data.selection`), or null without one. */
export function keptSelection(data) {
  const items = Array.isArray(data?.selection) ? data.selection : [];
  return items.length ? h("div", { class: "chips selection-chips" }, items.map((item) => selectionChip(item))) : null;
}

export class SelectMode {
  /**
   * @param {{toggle: HTMLButtonElement, frame: HTMLIFrameElement, chips: HTMLElement}} els
   * @param {() => string | null} previewUrl  the preview's URL (its origin is the page's)
   * @param {(edit: object) => void} onTextEdit  a `kiln-text-edit` from the page
   */
  constructor(els, previewUrl, onTextEdit) {
    this.els = els;
    this.previewUrl = previewUrl;
    this.onTextEdit = onTextEdit;
    this.on = false;
    this.items = [];
    els.toggle.addEventListener("click", () => this.set(!this.on));
    els.frame.addEventListener("load", () => this.send());
    window.addEventListener("message", (event) => this.received(event));
    window.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && this.on) this.set(false);
    });
    this.render();
  }

  origin() {
    try {
      return new URL(this.previewUrl()).origin;
    } catch {
      return null;
    }
  }

  /** Turn the mode on or off (in the page too). */
  set(on) {
    this.on = Boolean(on) && Boolean(this.origin());
    this.els.toggle.setAttribute("aria-pressed", String(this.on));
    this.els.toggle.classList.toggle("active", this.on);
    this.send();
  }

  send() {
    const origin = this.origin();
    const target = this.els.frame.contentWindow;
    if (origin && target) target.postMessage({ type: "kiln-select-mode", on: this.on }, origin);
  }

  received(event) {
    if (event.source !== this.els.frame.contentWindow || event.origin !== this.origin()) return;
    const data = event.data || {};
    if (data.type === "kiln-select-ready") this.send();
    else if (data.type === "kiln-select-mode" && !data.on) this.set(false);
    else if (data.type === "kiln-select") this.add(data);
    else if (data.type === "kiln-text-edit") this.onTextEdit(data);
  }

  /** Select an element (a message from the page); the same element again is kept once. */
  add(data) {
    if (typeof data.file !== "string" || !Number.isInteger(data.line) || !Number.isInteger(data.column)) return;
    const item = {
      file: data.file, line: data.line, column: data.column,
      tag: String(data.tag || "element"), text: String(data.text || ""),
    };
    if (data.component) item.component = String(data.component);
    const same = (other) => other.file === item.file && other.line === item.line && other.column === item.column;
    if (this.items.some(same) || this.items.length >= MAX_SELECTED) return;
    this.items.push(item);
    this.render();
  }

  /** What the next message carries (a copy). */
  selection() {
    return this.items.map((item) => ({ ...item }));
  }

  /** The message went: its selection is its own now. Another chat: nothing is selected. */
  clear() {
    this.items = [];
    this.render();
  }

  /** No preview (another chat): the mode is off and nothing is selected. */
  reset() {
    this.set(false);
    this.clear();
  }

  render() {
    const { chips } = this.els;
    chips.replaceChildren(...this.items.map((item, index) => selectionChip(item, () => {
      this.items.splice(index, 1);
      this.render();
    })));
    chips.hidden = !this.items.length;
  }
}
