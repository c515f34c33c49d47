// kiln's render check (issue 23): opens the sandbox's dev server in headless Chromium, collects
// what goes wrong while it loads and settles, and prints ONE JSON line on stdout.
//
// Runs in kiln/render-browser, in the sandbox's own network namespace (localhost is the sandbox).
// Chromium is driven over CDP on a pipe (--remote-debugging-pipe: no port to reach). The browser
// is told to go nowhere but loopback (a dead proxy for everything else, names resolve to nothing).
//
// Input: env KILN_RENDER_CONFIG = {"url", "deadline_ms", "idle_ms", "reporter": str|null,
// "screenshot": bool, "go_file": str|null, "wait_ms"}. With "go_file", the browser starts at once
// and waits on an empty page until that file exists (kiln starts it while the answer streams and
// creates the file when the build passed); the deadline counts from then. Output: {"loaded", "blank", "timed_out", "reports": [raw reports],
// "screenshot": base64 PNG|null, "seconds", "error": str|null}. Raw reports carry the shared
// preview-error field names (kind, message, stack, source, url); kiln normalises them.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";

const started = Date.now();
const config = JSON.parse(process.env.KILN_RENDER_CONFIG || "{}");
const deadlineMs = config.deadline_ms || 15000;
let deadline = started + deadlineMs;
const idleMs = config.idle_ms || 500;
// A page that never goes quiet (polling, a stream) is judged this long after its load.
const settleMaxMs = config.settle_max_ms || 5000;
let loadedAt = 0;
const target = new URL(config.url || "http://localhost:5173/");
const reports = [];
const requests = new Map(); // requestId -> {method, url, type}
const inflight = new Set();
const sourceMaps = new Map(); // script url -> sourceMapURL
let lastActivity = Date.now();
const REPORTED_TYPES = new Set(["Document", "Script", "Fetch", "XHR"]);
let loaded = false;

const ROOT_EMPTY = `(() => {
  const root = document.getElementById("root") || document.getElementById("app")
    || document.getElementById("__next") || document.body;
  if (!root) return true;
  const skip = new Set(["SCRIPT", "STYLE", "LINK", "NOSCRIPT", "TEMPLATE"]);
  const shown = [...root.children].some((el) => !skip.has(el.tagName));
  return !shown && !(root.innerText || "").trim();
})()`;
const VITE_OVERLAY = `(() => {
  const overlay = document.querySelector("vite-error-overlay");
  const body = overlay && overlay.shadowRoot && overlay.shadowRoot.querySelector(".message-body");
  return body ? body.textContent : null;
})()`;

// Milestones in seconds since the runner started (bench/render_check.py prints them).
const timings = {};
const mark = (name) => { timings[name] = (Date.now() - started) / 1000; };

function finish(result) {
  const seconds = (Date.now() - started) / 1000;
  process.stdout.write(JSON.stringify({ reports, seconds, timings, ...result }) + "\n");
  process.exit(0);
}

const chrome = spawn(
  process.env.CHROMIUM || "chromium",
  [
    "--headless=new",
    "--no-sandbox", // the container is the sandbox: no user namespaces without capabilities
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--remote-debugging-pipe",
    "--user-data-dir=/tmp/profile",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-extensions",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-sync",
    "--mute-audio",
    // Loopback only: loopback bypasses the proxy (Chromium's implicit rule), anything else goes
    // to a proxy that is not there; and no name but localhost resolves.
    "--proxy-server=http://127.0.0.1:9",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost",
    "--window-size=1280,800",
    "about:blank",
  ],
  { stdio: ["ignore", "ignore", "ignore", "pipe", "pipe"] },
);
chrome.on("exit", (code) => finish({ error: `chromium exited (${code})`, loaded, blank: false }));

const toChrome = chrome.stdio[3];
const fromChrome = chrome.stdio[4];
let nextId = 1;
const pending = new Map();
const handlers = new Map();
let buffered = "";

fromChrome.on("data", (chunk) => {
  buffered += chunk.toString("utf8");
  let end;
  while ((end = buffered.indexOf("\0")) >= 0) {
    const message = JSON.parse(buffered.slice(0, end));
    buffered = buffered.slice(end + 1);
    if (message.id && pending.has(message.id)) {
      const { resolve, reject } = pending.get(message.id);
      pending.delete(message.id);
      if (message.error) reject(new Error(message.error.message));
      else resolve(message.result);
    } else if (message.method && handlers.has(message.method)) {
      handlers.get(message.method)(message.params);
    }
  }
});

function send(method, params = {}, sessionId = undefined) {
  const id = nextId++;
  toChrome.write(JSON.stringify({ id, method, params, sessionId }) + "\0");
  return new Promise((resolve, reject) => pending.set(id, { resolve, reject }));
}

// --- source maps (Vite serves each module with an inline map) ------------------------------
const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
function decodeMappings(mappings) {
  const lines = [];
  let source = 0, origLine = 0, origCol = 0;
  for (const line of mappings.split(";")) {
    const segments = [];
    let genCol = 0;
    for (const segment of line.split(",")) {
      if (!segment) continue;
      const values = [];
      let value = 0, shift = 0;
      for (const char of segment) {
        const digit = B64.indexOf(char);
        value += (digit & 31) << shift;
        if (digit & 32) { shift += 5; continue; }
        values.push(value & 1 ? -(value >> 1) : value >> 1);
        value = 0; shift = 0;
      }
      genCol += values[0];
      if (values.length >= 4) {
        source += values[1]; origLine += values[2]; origCol += values[3];
        segments.push([genCol, source, origLine, origCol]);
      }
    }
    lines.push(segments);
  }
  return lines;
}

function originalPosition(scriptUrl, line, column) {
  // line and column: 0-based in the served module; answer 1-based in the original source.
  const mapUrl = sourceMaps.get(scriptUrl);
  if (!mapUrl || !mapUrl.startsWith("data:")) return null;
  try {
    const map = JSON.parse(Buffer.from(mapUrl.split(",")[1], "base64").toString("utf8"));
    const segments = decodeMappings(map.mappings)[line] || [];
    let best = null;
    for (const segment of segments) if (segment[0] <= column) best = segment;
    best = best || segments[0];
    return best ? { line: best[2] + 1, column: best[3] + 1 } : null;
  } catch {
    return null;
  }
}

function projectPath(url) {
  try {
    const parsed = new URL(url);
    if (parsed.origin !== target.origin) return null;
    const path = decodeURIComponent(parsed.pathname).replace(/^\/+/, "");
    if (!path || path.startsWith("@") || path.startsWith("node_modules/")) return null;
    return path;
  } catch {
    return null;
  }
}

function sourceOf(frames) {
  for (const frame of frames || []) {
    const file = projectPath(frame.url);
    if (!file) continue;
    const mapped = originalPosition(frame.url, frame.lineNumber, frame.columnNumber);
    // "/src/App.jsx": a path on the dev server's origin; kiln's normalisation makes it the
    // project path.
    return mapped
      ? { file: `/${file}`, ...mapped }
      : { file: `/${file}`, line: frame.lineNumber + 1, column: frame.columnNumber + 1 };
  }
  return null;
}

function stackText(frames) {
  return (frames || [])
    .map((f) => `    at ${f.functionName || "<anonymous>"} (${f.url}:${f.lineNumber + 1}:${f.columnNumber + 1})`)
    .join("\n");
}

// A hostile page may throw thousands of errors a second with megabyte messages: identical
// reports are merged (count), text is capped, and past MAX_REPORTS distinct ones are dropped.
const MAX_REPORTS = 100;
const seen = new Map();
function keep(raw) {
  if (!raw || typeof raw !== "object") return;
  const message = String(raw.message || "").slice(0, 2000);
  const key = `${raw.kind}\u0000${message}\u0000${JSON.stringify(raw.source || null)}`;
  const earlier = seen.get(key);
  if (earlier) {
    earlier.count = (earlier.count || 1) + 1;
    return;
  }
  if (reports.length >= MAX_REPORTS) return;
  const kept = { ...raw, message, stack: String(raw.stack || "").slice(0, 4000), count: 1 };
  seen.set(key, kept);
  reports.push(kept);
}

// One error seen by both the browser (CDP) and the preview reporter (the same page) is one
// finding, whichever comes first, with the browser's stack and mapped source.
const seenByBrowser = new Set(); // kind + message
const fromReporter = new Map(); // kind + message -> the reporter's kept report

function report(kind, message, frames, url) {
  const both = `${kind}\u0000${String(message).slice(0, 2000)}`;
  const seen = { kind, message, stack: stackText(frames), source: sourceOf(frames), url: url || target.href };
  seenByBrowser.add(both);
  lastActivity = Date.now();
  const reported = fromReporter.get(both);
  if (reported) {
    fromReporter.delete(both);
    Object.assign(reported, { stack: seen.stack.slice(0, 4000), source: seen.source, url: seen.url });
    return;
  }
  keep(seen);
}

function remote(arg) {
  if (arg.type === "string") return arg.value;
  if ("value" in arg) return String(arg.value);
  return arg.description || arg.type;
}

// --- what the page says ------------------------------------------------------------------
handlers.set("Runtime.exceptionThrown", ({ exceptionDetails: d }) => {
  const description = (d.exception && d.exception.description) || d.text || "error";
  const rejection = (d.text || "").includes("(in promise)");
  const message = description.split("\n")[0];
  report(rejection ? "unhandled_rejection" : "uncaught", message, d.stackTrace && d.stackTrace.callFrames);
});
handlers.set("Runtime.consoleAPICalled", ({ type, args, stackTrace }) => {
  const kind = { error: "console_error", warning: "console_warn", assert: "console_error" }[type];
  if (!kind) return;
  const message = args.map(remote).join(" ");
  const vite = message.startsWith("[vite]") || message.includes("[plugin:vite");
  // React's "Warning: ..." lines are made warnings where every report is normalised
  // (sandbox/preview/error_reports.py), for this runner and the preview's reporter alike.
  const shown = vite && kind === "console_error" ? "vite_error" : kind;
  report(shown, message, stackTrace && stackTrace.callFrames);
});
handlers.set("Log.entryAdded", ({ entry }) => {
  if (entry.level !== "error" || entry.source === "network" || entry.source === "console-api") return;
  report("console_error", entry.text, entry.stackTrace && entry.stackTrace.callFrames);
});
handlers.set("Runtime.bindingCalled", ({ name, payload }) => {
  if (name !== "__kilnReport") return;
  if (payload.length > 256 * 1024) return; // no report is that long: junk
  try {
    const parsed = JSON.parse(payload);
    for (const raw of (Array.isArray(parsed) ? parsed : [parsed]).slice(0, MAX_REPORTS)) {
      if (!raw || typeof raw !== "object") continue;
      const both = `${raw.kind}\u0000${String(raw.message || "").slice(0, 2000)}`;
      if (seenByBrowser.has(both)) continue;
      const before = reports.length;
      keep(raw);
      if (reports.length > before) fromReporter.set(both, reports[reports.length - 1]);
    }
  } catch {
    // junk from the page: kiln ignores what it cannot read
  }
});
handlers.set("Debugger.scriptParsed", ({ url, sourceMapURL }) => {
  if (url && sourceMapURL) sourceMaps.set(url, sourceMapURL);
});
handlers.set("Network.requestWillBeSent", ({ requestId, request, type }) => {
  requests.set(requestId, { method: request.method, url: request.url, type });
  inflight.add(requestId);
  lastActivity = Date.now();
});
handlers.set("Network.responseReceived", ({ requestId, response }) => {
  const request = requests.get(requestId) || { method: "GET", url: response.url };
  // The page's own requests only (a favicon's 500 is no finding); a script that is not there
  // (404) breaks the page as surely as one that fails.
  const script = request.type === "Script";
  if ((response.status >= 500 || (script && response.status >= 400)) && REPORTED_TYPES.has(request.type)) {
    const kind = script ? "module_load" : "network";
    report(kind, `${request.method} ${request.url} answered ${response.status}`, null, request.url);
  }
});
handlers.set("Network.loadingFinished", ({ requestId }) => {
  inflight.delete(requestId);
  lastActivity = Date.now();
});
handlers.set("Network.loadingFailed", ({ requestId, errorText, canceled, type }) => {
  inflight.delete(requestId);
  lastActivity = Date.now();
  const request = requests.get(requestId);
  if (canceled || !request || request.url.startsWith("ws")) return;
  const kind = type === "Script" ? "module_load" : "network";
  if (kind === "network" && !["Fetch", "XHR"].includes(type)) return;
  report(kind, `${request.method} ${request.url} failed: ${errorText}`, null, request.url);
});
// A page that reloads itself (Vite does once it optimized dependencies it discovered on this
// first load: the earlier document may have thrown with a stale React) is judged by its new
// document: what the old one reported went with it.
let navigations = 0;
handlers.set("Page.frameNavigated", ({ frame }) => {
  if (frame.parentId || frame.url === "about:blank") return;
  navigations += 1;
  if (navigations === 1) return; // the check's own navigation
  reports.length = 0;
  seen.clear();
  seenByBrowser.clear();
  fromReporter.clear();
  loaded = false;
  lastActivity = Date.now();
  mark(`reload ${navigations - 1}`);
});
handlers.set("Page.loadEventFired", () => {
  loaded = true;
  loadedAt = Date.now();
  mark("loaded");
  lastActivity = Date.now();
});

// Findings are confirmed this long after the page went quiet: a reload that follows them (Vite's
// reload comes over its socket, not as a request) replaces them with the new document's.
const CONFIRM_MS = config.confirm_ms || 1500;
const QUIET_KINDS = new Set(["console_warn", "console_log"]); // never findings: no wait for them

async function settle() {
  let quietSince = 0;
  while (Date.now() < deadline) {
    const quiet = inflight.size === 0 && Date.now() - lastActivity >= idleMs;
    const settled = loaded && (quiet || Date.now() - loadedAt >= settleMaxMs);
    if (!settled) quietSince = 0;
    else if (!reports.some((r) => !QUIET_KINDS.has(r.kind))) return false;
    else if (!quietSince) quietSince = Date.now();
    else if (Date.now() - quietSince >= CONFIRM_MS) return false;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return true;
}

// The browser is ready: wait (polling; a file is all a confined container is told by) for the
// check, then count the check's deadline from there.
async function waitForGo(file, until) {
  process.stderr.write("kiln-render: the browser is ready, waiting for the check\n");
  while (!existsSync(file)) {
    if (Date.now() > until) finish({ error: "no render check came for the waiting browser", loaded, blank: false });
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  mark("go");
  deadline = Date.now() + deadlineMs;
}

function armDeadline() {
  setTimeout(() => finish({ error: "deadline passed", loaded, blank: false, timed_out: true }), deadline - Date.now() + 2000);
}

async function main() {
  const { targetId } = await send("Target.createTarget", { url: "about:blank" });
  const { sessionId } = await send("Target.attachToTarget", { targetId, flatten: true });
  const page = (method, params) => send(method, params, sessionId);
  mark("browser");
  await Promise.all([
    page("Runtime.enable"),
    page("Log.enable"),
    page("Network.enable"),
    page("Page.enable"),
    page("Debugger.enable"),
    page("Runtime.addBinding", { name: "__kilnReport" }),
  ]);
  if (config.reporter) await page("Page.addScriptToEvaluateOnNewDocument", { source: config.reporter });
  if (config.go_file) {
    await waitForGo(config.go_file, Date.now() + (config.wait_ms || 1800000));
    armDeadline();
  }
  const navigation = await page("Page.navigate", { url: target.href });
  if (navigation.errorText) {
    report("network", `GET ${target.href} failed: ${navigation.errorText}`, null, target.href);
  }
  const timedOut = await settle();
  mark("settled");
  if (!loaded) {
    // Judging a page that never finished loading (a slow first compile) would call it blank.
    finish({ error: "the page did not finish loading before the deadline", loaded, blank: false, timed_out: true });
    return;
  }
  const evaluate = async (expression) =>
    (await page("Runtime.evaluate", { expression, returnByValue: true })).result.value;
  const overlay = await evaluate(VITE_OVERLAY);
  if (overlay) report("vite_error", overlay.trim(), null, target.href);
  const blank = Boolean(await evaluate(ROOT_EMPTY));
  let screenshot = null;
  if (config.screenshot !== false) {
    screenshot = (await page("Page.captureScreenshot", { format: "png" })).data;
  }
  mark("screenshot");
  finish({ loaded, blank, timed_out: timedOut, screenshot, error: null });
}

if (!config.go_file) armDeadline();  // a waiting browser arms it at the go
main().catch((error) => finish({ error: String(error && error.message), loaded, blank: false }));
