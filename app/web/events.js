// A run's event stream over SSE, resumable without duplicates.
//
// The server sends `id: <seq>`, `event: <type>`, `data: <json>`, replays everything after
// `?after=<seq>`, and ends the stream after `run_finished`. This class remembers the last seq
// it delivered; on any error (a network blip, a server restart, a stream that ended early) it
// closes the EventSource and opens a new one with `?after=<last seq>` after a short backoff, and
// it drops anything at or below the last seq, so no text is ever shown twice.

import { eventsUrl } from "./api.js";

// EventSource delivers a named event only to a listener for that name, so every type is listed.
export const EVENT_TYPES = [
  "run_started", "run_finished", "turn_start", "turn_end", "text",
  "thinking_start", "thinking_content", "thinking_end", "sandbox_start", "sandbox_end",
  "sandbox_ready", "preview_ready",
  "file_start", "file_content", "file_end", "file_written", "install_start", "install_content",
  "install_end", "install_started", "install_finished", "command", "command_started",
  "command_finished", "output", "web_search", "url_scrape", "tool_result", "done", "warning",
  "error", "postgen", "session_complete", "message", "restore", "version",
  "context", "read", "edit_start", "edit_block", "edit_end", "edit_applied",
  "rollback", "preview_error",
];

const BACKOFF_MS = [250, 1000, 2000, 4000, 8000];

export class RunStream {
  /**
   * @param {string} runId
   * @param {{after?: number, onEvent: (seq: number, event: object) => void,
   *          onState?: (state: string) => void}} handlers
   */
  constructor(runId, { after = 0, onEvent, onState = () => {} }) {
    this.runId = runId;
    this.lastSeq = after;
    this.onEvent = onEvent;
    this.onState = onState;
    this.source = null;
    this.closed = false;
    this.failures = 0;
    this.timer = null;
    this.finished = new Promise((resolve) => (this.resolveFinished = resolve));
  }

  /** Open the stream; `finished` resolves after `run_finished` (or `close()`). */
  start() {
    this.open();
    return this;
  }

  /** Stop listening for good. */
  close() {
    this.closed = true;
    clearTimeout(this.timer);
    if (this.source) this.source.close();
    this.source = null;
    this.resolveFinished(this.lastSeq);
  }

  open() {
    if (this.closed) return;
    this.onState(this.failures ? "reconnecting" : "connecting");
    const source = new EventSource(eventsUrl(this.runId, this.lastSeq));
    this.source = source;
    source.onopen = () => this.onState("live");
    source.onerror = () => this.retry(source);
    const deliver = (message) => this.deliver(message);
    for (const type of EVENT_TYPES) source.addEventListener(type, deliver);
  }

  deliver(message) {
    const seq = Number.parseInt(message.lastEventId, 10);
    if (!Number.isFinite(seq) || seq <= this.lastSeq) return; // a replayed duplicate
    let event;
    try {
      event = JSON.parse(message.data);
    } catch {
      return;
    }
    if (!event.type) event.type = message.type;
    this.lastSeq = seq;
    this.failures = 0;
    this.onEvent(seq, event);
    if (event.type === "run_finished") {
      this.onState("ended");
      this.close();
    }
  }

  retry(source) {
    // EventSource would reconnect on its own, but with its original `?after=`; reopen instead.
    source.close();
    if (this.closed || source !== this.source) return;
    const delay = BACKOFF_MS[Math.min(this.failures, BACKOFF_MS.length - 1)];
    this.failures += 1;
    this.onState("reconnecting");
    this.timer = setTimeout(() => this.open(), delay);
  }
}
