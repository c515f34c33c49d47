// Words a person understands for everything that can go wrong, and for why a run stopped.
// Server messages are kiln's own human messages; anything that looks like a stack trace or an
// HTML page is never shown as is. The titles per code are generated (vocabulary.js).

import { ERROR_TITLES } from "./vocabulary.js";

const STATUS_WORDS = {
  0: "kiln cannot be reached. Check that `kiln serve` is running and your connection works.",
  401: "You are signed out. Open the sign-in link that `kiln serve` printed.",
  404: "That was not found. It may have been deleted, or belongs to someone else.",
  409: "That is already finished.",
  413: "That message is too long.",
  429: "Too many builds are running at once. Wait for one to finish, then try again.",
  500: "Something went wrong on the server. Try again in a moment.",
  502: "The server is not reachable right now. Try again in a moment.",
  503: "The service is starting or busy. Try again in a moment.",
  504: "That took too long and was stopped. Try again, or make the app smaller.",
};

/** True when `text` is safe to show: short enough, and not a traceback or an HTML page. */
export function presentable(text) {
  if (typeof text !== "string" || !text.trim()) return false;
  return !/Traceback \(most recent call last\)|^\s*<(!doctype|html)|\n\s+at \S+ \(/i.test(text);
}

/** A sentence for an HTTP failure with `status` and error `code` (and the server's message). */
export function describeApiError(status, code, serverMessage) {
  if (code === "network") return STATUS_WORDS[0];
  if (presentable(serverMessage) && status < 500) return serverMessage;
  if (code === "file" && status === 404) return "That file is no longer in the workspace.";
  return STATUS_WORDS[status] || STATUS_WORDS[status >= 500 ? 500 : 0] || `Request failed (${status}).`;
}

/** The words for an error `code` (a short sentence), or "" for a code without words. */
export const describeCode = (code) => ERROR_TITLES[code] || "";

/** `{title, detail}` for an `error` or `warning` event. */
export function describeRunError(event) {
  const title = ERROR_TITLES[event.code] || (event.type === "warning" ? "Warning" : "Something went wrong");
  const detail = presentable(event.message) ? event.message.trim() : "";
  return { title, detail };
}

const STOP_WORDS = {
  cancelled: "cancelled",
  error: "an error",
  budget_exceeded: "budget used up",
  context_limit_exceeded: "conversation too long for the model",
  code_written: "code written",
  max_turns: "turn limit reached",
  done: "the model said it is done",
  conversational: "answered in words",
  no_output: "the model gave no usable answer",
};

/** A few words for a stop reason. */
export const describeStop = (reason) => STOP_WORDS[reason] || (reason || "").replaceAll("_", " ");

const CONTINUE_WORDS = {
  continuation: "with the tool results",
  nudge: "with a nudge to go on",
};

/** A few words for how the loop continued ("continues …"). */
export const describeContinue = (prompt) => CONTINUE_WORDS[prompt] || "";

const RUN_STATUS_WORDS = {
  queued: "Waiting for a worker…",
  running: "Building…",
  completed: "Done",
  failed: "Failed",
  cancelled: "Cancelled",
};

/** A short label for a run status. */
export const describeStatus = (status) => RUN_STATUS_WORDS[status] || status;
