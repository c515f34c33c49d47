// Words a person understands for everything that can go wrong, and for why a run stopped.
// Server messages are kiln's own human messages; anything that looks like a stack trace or an
// HTML page is never shown as is.

const ERROR_TITLES = {
  provider_auth: "The AI provider refused the API key",
  provider_rate_limited: "The AI provider is rate-limiting requests",
  provider_overloaded: "The AI provider is overloaded right now",
  provider_unavailable: "The AI provider could not be reached",
  provider_error: "The AI provider reported an error",
  model_refused: "That model cannot be used",
  context_limit_exceeded: "The conversation is too long for the model",
  budget_exceeded: "The run used up its budget",
  admission_refused: "Too many builds are running",
  config_error: "kiln is not configured for this",
  command_refused: "A command was refused for safety",
  command_failed: "A command failed",
  install_failed: "Installing packages failed",
  install_refused: "A package was refused",
  write_failed: "A file could not be written",
  sandbox_unavailable: "The app's sandbox is not available",
  sandbox_error: "The app's sandbox had a problem",
  dev_server_not_ready: "The preview server did not start",
  config_refused: "A protected config file was not changed",
  config_merged: "A config file was merged",
  parse_error: "The model's answer could not be read",
  invalid_file_path: "The model named an unsafe file path",
  invalid_package: "The model named an invalid package",
  invalid_command: "The model asked for an invalid command",
  invalid_command_args: "The model asked for an invalid command",
  unsupported_shell: "The model asked for a shell command",
  unclosed_tag: "The model's answer ended abruptly",
  missing_attribute: "The model's answer was malformed",
  invalid_attribute: "The model's answer was malformed",
  malformed_tag: "The model's answer was malformed",
  malformed_edit_block: "The model's edit was malformed",
  edit_no_match: "An edit did not match the file",
  edit_ambiguous: "An edit matched more than one place",
  rewrite_refused: "A rewrite that would drop code was refused",
  out_of_memory: "A command ran out of memory",
  disk_quota_exceeded: "The app's disk space is used up",
  sandbox_capacity: "The server has no room for another app right now",
  sandbox_not_found: "The app's sandbox is gone",
  docker_unavailable: "The sandbox engine (Docker) is not reachable",
  redis_unavailable: "kiln's queue (Redis) is not reachable",
  queue_unavailable: "kiln's queue (Redis) is not reachable",
  image_missing: "The app template is not installed on the server",
  disk_full: "The server's disk is full",
  file_too_large: "A file is too large to show",
  project_too_large: "The project is too large to save a version",
  project_error: "The project's versions could not be saved",
  file_not_kept: "A file cannot be kept in the project's versions",
  protected_path: "A file kiln or npm manages was not changed",
  internal_error: "Something went wrong inside kiln",
  // issue 23: the render check (a `postgen` event's `render.skipped`) and the preview's reports
  render_check_disabled: "The render check is turned off",
  render_check_image_missing: "The render check's browser image is not installed",
  render_check_timeout: "The app did not finish loading in time for the render check",
  render_check_failed: "The render check could not open the app",
  preview_errors_unavailable: "The preview's error reports are not kept on this server",
};

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
