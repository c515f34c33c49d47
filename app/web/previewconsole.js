// What the preview's page says while the person uses it: an error bar over the preview with
// "Fix it" (a follow-up message carrying the errors), and a Console view (console lines and
// failed requests, newest last). Both are cleared when the preview (re)loads and bounded, so a
// page reporting thousands of errors cannot slow the UI down: reports are queued and drawn once
// per animation frame, keeping only the newest. Everything is text (textContent), never HTML.

import { h } from "./dom.js";
import { describeKind, fixMessage, headline, isFinding, where } from "./previewerrors.js";

const CONSOLE_LINES = 500;
const BAR_ERRORS = 50; // kept for "Fix it" (the message itself carries the newest few)

export class PreviewConsole {
  /**
   * @param {{bar: HTMLElement, barText: HTMLElement, fix: HTMLButtonElement,
   *          dismiss: HTMLButtonElement, toggle: HTMLButtonElement, view: HTMLElement,
   *          lines: HTMLElement, clear: HTMLButtonElement}} els
   * @param {(content: string) => Promise<boolean>} send  sends a chat message; whether accepted
   * @param {() => number} limit  the longest message the server takes
   */
  constructor(els, send, limit) {
    this.els = els;
    this.send = send;
    this.limit = limit;
    this.pending = [];
    this.frame = 0;
    this.running = false;
    els.fix.addEventListener("click", () => this.fix());
    els.dismiss.addEventListener("click", () => this.hideBar());
    els.clear.addEventListener("click", () => this.clear());
    els.toggle.addEventListener("click", () => this.showConsole(els.view.hidden));
    this.clear();
  }

  /** One report from the preview's page. */
  add(error) {
    this.pending.push(error);
    if (this.pending.length > CONSOLE_LINES) this.pending.splice(0, this.pending.length - CONSOLE_LINES);
    if (isFinding(error)) {
      this.errors.push(error);
      if (this.errors.length > BAR_ERRORS) this.errors.shift();
      this.findings += 1;
    }
    this.total += 1;
    if (!this.frame) this.frame = requestAnimationFrame(() => this.draw());
  }

  /** The preview loaded again: what its old page said is gone. */
  clear() {
    cancelAnimationFrame(this.frame);
    this.frame = 0;
    this.pending = [];
    this.errors = [];
    this.findings = 0;
    this.total = 0;
    this.els.lines.replaceChildren(h("div", { class: "console-empty" }, "The preview's console lines, errors and failed requests show here."));
    this.els.toggle.textContent = "Console";
    this.hideBar();
  }

  /** A run is going (the chat takes no message): "Fix it" waits. */
  setRunning(running) {
    this.running = running;
    this.els.fix.disabled = running;
  }

  showConsole(shown) {
    this.els.view.hidden = !shown;
    this.els.toggle.setAttribute("aria-expanded", String(shown));
  }

  hideBar() {
    this.els.bar.hidden = true;
    this.shownFindings = this.findings; // the bar comes back with the next error
  }

  draw() {
    this.frame = 0;
    const { lines } = this.els;
    lines.querySelector(".console-empty")?.remove();
    const atEnd = lines.scrollTop + lines.clientHeight >= lines.scrollHeight - 40;
    lines.append(...this.pending.map(consoleLine));
    this.pending = [];
    const extra = lines.childElementCount - CONSOLE_LINES;
    for (let i = 0; i < extra; i += 1) lines.firstElementChild.remove();
    if (atEnd) lines.scrollTop = lines.scrollHeight;
    this.els.toggle.textContent = `Console (${this.total})`;
    if (this.findings > (this.shownFindings || 0)) this.showBar();
  }

  showBar() {
    const newest = this.errors.at(-1);
    const n = this.findings - (this.shownFindings || 0);
    const at = where(newest);
    const text = `${describeKind(newest.kind)}: ${headline(newest, 200)}${at ? ` (${at})` : ""}`;
    this.els.barText.textContent = n > 1 ? `${n} errors in the preview. Newest: ${text}` : `${text}`;
    this.els.fix.disabled = this.running;
    this.els.bar.hidden = false;
  }

  /** "Fix it": send the errors shown as a follow-up message; the bar goes once it is sent. */
  async fix() {
    const errors = this.errors.slice(-BAR_ERRORS);
    if (!errors.length || this.running) return;
    this.els.fix.disabled = true;
    const sent = await this.send(fixMessage(errors, this.limit()));
    if (sent) {
      this.errors = [];
      this.hideBar();
    } else {
      this.els.fix.disabled = this.running;
    }
  }
}

/** One Console line: kind, message (with a count when merged), where, and the page's URL. */
function consoleLine(error) {
  const at = where(error);
  const count = error.count > 1 ? ` (${error.count} times)` : "";
  const level = isFinding(error) ? "bad" : error.kind === "console_warn" ? "warn" : "info";
  return h(
    "div",
    { class: `console-line ${level}`, dataset: { kind: String(error.kind) } },
    h("span", { class: "console-kind" }, describeKind(error.kind)),
    h("span", { class: "console-message" }, `${String(error.message ?? "").slice(0, 2000)}${count}`),
    at ? h("span", { class: "console-where" }, at) : null,
    error.url ? h("span", { class: "console-url" }, String(error.url).slice(0, 500)) : null,
  );
}
