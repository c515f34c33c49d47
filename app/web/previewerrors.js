// What the preview's own page reports (issue 23): the per-sandbox stream of preview errors
// (`GET /api/sandboxes/{id}/preview-errors`, SSE) and the words for one error.
//
// A preview error is `{kind, message, stack, source: {file, line, column} | null, url, count}`.
// It comes from the app's own page, so it is untrusted: callers only ever put it in text nodes.

import { previewErrorsUrl } from "./api.js";

// Kinds that are findings (the error bar, "Fix it"); the others only show in the Console.
const FINDING_KINDS = new Set(["uncaught", "unhandled_rejection", "console_error", "vite_error", "module_load", "network", "blank_page"]);

const KIND_WORDS = {
  uncaught: "Error",
  unhandled_rejection: "Unhandled promise rejection",
  console_error: "console.error",
  console_warn: "console.warn",
  console_log: "console.log",
  vite_error: "Vite error",
  module_load: "Failed module load",
  network: "Failed request",
  blank_page: "Blank page",
};

/** Whether `error` is something broken (not a console line the app merely printed). */
export const isFinding = (error) => FINDING_KINDS.has(error?.kind);

/** A few words for an error's kind. */
export const describeKind = (kind) => KIND_WORDS[kind] || String(kind || "error").replaceAll("_", " ");

/** `src/App.jsx:12:5` (or `src/App.jsx:12`, `src/App.jsx`), or "" when the source is unknown. */
export function where(error) {
  const source = error?.source;
  if (!source || typeof source.file !== "string" || !source.file) return "";
  const line = Number.isInteger(source.line) ? `:${source.line}` : "";
  const column = line && Number.isInteger(source.column) ? `:${source.column}` : "";
  return `${source.file}${line}${column}`;
}

/** The first line of an error's message, at most `max` characters. */
export function headline(error, max = 300) {
  const first = String(error?.message ?? "").split("\n", 1)[0].trim();
  return first.length > max ? `${first.slice(0, max - 1)}…` : first;
}

const FIX_MESSAGE_CHARS = 4000; // the follow-up stays short: the model reads the files itself
const FIX_MESSAGE_ERRORS = 8;
const FIX_ERROR_CHARS = 600;

/** The text of the "Fix it" follow-up: an ordinary message that carries the errors (kind,
 * message, file:line, url), at most `limit` characters. */
export function fixMessage(errors, limit = FIX_MESSAGE_CHARS) {
  const max = Math.min(limit, FIX_MESSAGE_CHARS);
  const shown = errors.slice(-FIX_MESSAGE_ERRORS);
  const lines = [`The app shows ${errors.length === 1 ? "this error" : "these errors"} in the preview. Please fix ${errors.length === 1 ? "it" : "them"}.`];
  for (const [index, error] of shown.entries()) {
    const repeat = error.count > 1 ? ` (${error.count} times)` : "";
    lines.push("", `${index + 1}. ${describeKind(error.kind)}${repeat}: ${headline(error, FIX_ERROR_CHARS)}`);
    const at = where(error);
    if (at) lines.push(`   at ${at}`);
    if (error.url) lines.push(`   page: ${String(error.url).slice(0, 200)}`);
  }
  if (errors.length > shown.length) lines.push("", `(${errors.length - shown.length} earlier errors left out)`);
  const text = lines.join("\n");
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

const BACKOFF_MS = [500, 1000, 2000, 4000, 8000];
// Refused this many times in a row (a sandbox gone, a server that keeps no reports): stop until
// the preview loads again (`retry()`) rather than ask for ever.
const MAX_FAILURES = 8;
const SEEN_IDS = 2000; // stream ids remembered to drop an event delivered twice
// A stream opened afresh replays what the sandbox kept (up to a day): the pages of earlier
// visits, whose errors may be long fixed. Those stamped this long before the stream was opened
// are dropped (kiln's stream ids are `<ms>-<n>`); the slack covers the app's own first reports,
// sent while the stream was still connecting, and clocks a little apart.
const HISTORY_SLACK_MS = 5 * 60_000;
const STAMPED_ID = /^(\d{10,})-\d+$/;

/** Follows one sandbox's preview errors; `follow(null)` stops. Reconnects resume after the last
 * event seen: the browser's own reconnect sends `Last-Event-ID`; a stream opened anew (after an
 * HTTP error, which ends an EventSource) asks for `?after=<last id>`. */
export class PreviewErrorStream {
  /** @param {(error: object) => void} onError */
  constructor(onError) {
    this.onError = onError;
    this.sandboxId = null;
    this.source = null;
    this.timer = null;
    this.failures = 0;
    this.lastId = "";
    this.seen = new Set();
  }

  /** Follow `sandboxId` (a chat's current sandbox; null: none). The same one again is a no-op. */
  follow(sandboxId) {
    if (sandboxId === this.sandboxId) return;
    this.stop();
    this.sandboxId = sandboxId;
    this.lastId = "";
    this.seen.clear();
    this.failures = 0;
    this.since = Date.now() - HISTORY_SLACK_MS;
    if (sandboxId) this.open();
  }

  stop() {
    clearTimeout(this.timer);
    this.source?.close();
    this.source = null;
  }

  /** The preview loaded again: a stream that gave up asks once more. */
  retry() {
    if (!this.sandboxId || this.source) return;
    this.failures = 0;
    this.open();
  }

  open() {
    const sandboxId = this.sandboxId;
    const source = new EventSource(previewErrorsUrl(sandboxId, this.lastId));
    this.source = source;
    source.addEventListener("preview_error", (message) => this.deliver(message));
    source.onopen = () => { this.failures = 0; };
    // CONNECTING: the browser reconnects by itself (with Last-Event-ID). CLOSED: an HTTP error
    // ended it (a 404 for a sandbox gone, an outage): open anew later, while still following.
    source.onerror = () => {
      if (source.readyState !== EventSource.CLOSED || source !== this.source) return;
      this.failures += 1;
      if (this.failures >= MAX_FAILURES) {
        this.source = null;
        return;
      }
      const delay = BACKOFF_MS[Math.min(this.failures - 1, BACKOFF_MS.length - 1)];
      this.timer = setTimeout(() => { if (source === this.source) this.open(); }, delay);
    };
  }

  deliver(message) {
    const id = message.lastEventId;
    if (id) {
      if (this.seen.has(id)) return; // delivered twice (a resumed stream's overlap)
      this.seen.add(id);
      if (this.seen.size > SEEN_IDS) this.seen.delete(this.seen.values().next().value);
      this.lastId = id;
      if (Number(STAMPED_ID.exec(id)?.[1] ?? Infinity) < this.since) return; // an old visit's
    }
    let error;
    try {
      error = JSON.parse(message.data);
    } catch {
      return;
    }
    if (error && typeof error === "object" && typeof error.kind === "string") this.onError(error);
  }
}
