// Compact cards in the transcript: installs and commands (status, exit code, expandable
// output), web searches, page reads and file reads, files written, edits of existing files,
// the files an edit turn was shown, checks after generation, errors and warnings, and the
// per-turn markers that say why the loop went on or stopped.

import { h } from "./dom.js";
import { describeCode, describeContinue, describeRunError, describeStop, presentable } from "./errors.js";
import { describeKind, headline, where } from "./previewerrors.js";

const OUTPUT_LINES = 400; // per card; the log panel keeps more

/** An install or a command: queued, running, then finished with an exit code. */
export class StepCard {
  constructor(kind, title) {
    this.kind = kind;
    this.lines = 0;
    this.status = h("span", { class: "card-status" }, "waiting");
    this.output = h("pre", { class: "card-output" });
    this.summary = h("summary", {}, "Output");
    this.details = h("details", { class: "card-details", hidden: true }, this.summary, this.output);
    this.el = h(
      "div",
      { class: `card step ${kind}`, dataset: { state: "queued" } },
      h("div", { class: "card-head" }, h("span", { class: "card-icon", "aria-hidden": "true" }, kind === "install" ? "⬇" : "▶"),
        h("span", { class: "card-title" }, title), this.status),
      this.details,
    );
  }

  setState(state, label) {
    this.el.dataset.state = state;
    this.status.textContent = label;
  }

  start() {
    this.setState("running", "running…");
  }

  addOutput(line) {
    this.details.hidden = false;
    this.lines += 1;
    if (this.lines > OUTPUT_LINES) this.output.firstChild?.remove();
    this.output.append(`${line}\n`);
    this.summary.textContent = `Output (${this.lines} line${this.lines === 1 ? "" : "s"})`;
  }

  finish(exitCode, alreadyInstalled = false) {
    const ok = exitCode === 0;
    const label = alreadyInstalled ? "already installed" : ok ? "exit 0" : `failed, exit ${exitCode ?? "?"}`;
    this.setState(ok ? "ok" : "failed", label);
  }

  refuse() {
    this.setState("failed", "refused");
  }

  /** Whether the card still waits for its end (queued or running). */
  get open() {
    return ["queued", "running"].includes(this.el.dataset.state);
  }

  /** The run ended (or its worker stopped) before this step did. */
  stop(label) {
    this.setState("stopped", label);
  }
}

const TOOL_TITLES = {
  web_search: (request) => `Searching the web: ${request}`,
  url_scrape: (request) => `Reading ${request}`,
  read: (request) => `Looking at ${request}`,
};

const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;

/** A web search, a page read or a file read (`<edward_read>`), and its result. */
export class ToolCard {
  constructor(kind, request) {
    this.request = request;
    const title = TOOL_TITLES[kind](request);
    this.status = h("span", { class: "card-status" }, "working…");
    this.body = h("details", { class: "card-details", hidden: true });
    this.el = h(
      "div",
      { class: "card tool", dataset: { state: "running" } },
      h("div", { class: "card-head" }, h("span", { class: "card-icon", "aria-hidden": "true" }, "◎"),
        h("span", { class: "card-title" }, title), this.status),
      this.body,
    );
  }

  get open() {
    return this.el.dataset.state === "running";
  }

  /** The run ended before the result came. */
  stop(label) {
    this.el.dataset.state = "stopped";
    this.status.textContent = label;
  }

  result(event) {
    this.el.dataset.state = event.ok ? "ok" : "failed";
    this.status.textContent = event.ok ? "done" : "failed";
    if (event.text) {
      this.body.hidden = false;
      this.body.replaceChildren(h("summary", {}, event.ok ? "Result" : "Why"), h("pre", { class: "card-output" }, event.text));
    }
  }
}

/** The files a turn wrote, as chips that open the file. */
export class FilesCard {
  constructor(onOpen, project) {
    this.chips = new Map();
    this.list = h("div", { class: "chips" });
    this.title = h("span", { class: "card-title" }, project ? `Writing files for ${project}` : "Writing files");
    this.el = h(
      "div",
      { class: "card files-card" },
      h("div", { class: "card-head" }, h("span", { class: "card-icon", "aria-hidden": "true" }, "▤"), this.title),
      this.list,
    );
    this.onOpen = onOpen;
  }

  start(path) {
    let chip = this.chips.get(path);
    if (!chip) {
      chip = h("button", { type: "button", class: "chip", onclick: () => this.onOpen(path) }, path);
      this.chips.set(path, chip);
      this.list.append(chip);
    }
    chip.classList.add("writing");
  }

  end(path) {
    this.chips.get(path)?.classList.remove("writing");
  }

  /** A cancel left `rolledBack` (files never ended) as they were before; the others are kept
   * whole. */
  rollBack(rolledBack) {
    this.rolledBack = new Set(rolledBack);
    for (const path of rolledBack) {
      this.start(path);
      const chip = this.chips.get(path);
      chip.classList.remove("writing");
      chip.classList.add("rolled-back");
      chip.title = "Cancelled while it was written: left as it was before this run";
    }
    this.close();
  }

  close() {
    const back = this.rolledBack?.size || 0;
    const n = this.chips.size - back;
    let title = `Wrote ${n} file${n === 1 ? "" : "s"}`;
    if (back) title = `Kept ${n} whole file${n === 1 ? "" : "s"} · rolled back ${back} unfinished`;
    this.title.textContent = title;
    this.el.hidden = this.chips.size === 0; // a turn that only edited: its edit cards say it all
  }
}

/** An edit of an existing file: its search/replace blocks, then applied or refused. */
export class EditCard {
  constructor(path, onOpen) {
    this.path = path;
    this.blocks = 0;
    this.title = h("span", { class: "card-title" }, `Editing ${path}`);
    this.status = h("span", { class: "card-status" }, "writing…");
    this.el = h(
      "div",
      { class: "card edit", dataset: { state: "running", path } },
      h("div", { class: "card-head" }, h("span", { class: "card-icon", "aria-hidden": "true" }, "✎"),
        this.title, this.status,
        h("button", { type: "button", class: "chip", onclick: () => onOpen(path) }, "open")),
    );
  }

  block() {
    this.blocks += 1;
    this.status.textContent = plural(this.blocks, "block");
  }

  /** The blocks were applied (`edit_applied` says how many; it may come without `edit_block`s). */
  applied(blocks) {
    this.el.dataset.state = "ok";
    this.title.textContent = `Edited ${this.path} (${plural(blocks || this.blocks, "block")})`;
    this.status.textContent = "applied";
  }

  refused() {
    this.el.dataset.state = "failed";
    this.title.textContent = `Edit of ${this.path} not applied`;
    this.status.textContent = "refused";
  }

  get open() {
    return this.el.dataset.state === "running";
  }

  /** The run ended before the edit was applied. */
  stop(label) {
    this.el.dataset.state = "stopped";
    this.title.textContent = `Edit of ${this.path} not applied`;
    this.status.textContent = label;
  }
}

/** Where a run's worker stopped and another took the run over (`run_started` of attempt 2+). */
export function restartNotice(event) {
  const resumed = event.resumed && event.from_turn;
  const text = resumed
    ? `The worker restarted; the run resumed from turn ${event.from_turn}.`
    : "The worker restarted; the run started over.";
  return h("div", { class: "turn-marker restart", role: "note" }, h("span", {}, text));
}

/** The files an edit turn was shown (`context` event): why each, its tokens, and those left out. */
export function contextCard(event) {
  const included = event.included || [];
  const leftOut = event.left_out || [];
  const tokens = (f) => (f.tokens == null ? "" : `, ${f.tokens} tokens`);
  const row = (f) => h("li", {}, h("code", {}, f.path), ` (${f.reason}${tokens(f)})`);
  const summary = `Looked at ${plural(included.length, "file")} of the project`
    + (leftOut.length ? `, ${leftOut.length} left out` : "");
  return h(
    "details",
    { class: "card context" },
    h("summary", { class: "card-head" }, h("span", { class: "card-icon", "aria-hidden": "true" }, "⌕"),
      h("span", { class: "card-title" }, summary)),
    h("p", { class: "card-text" }, `File map ${event.map_tokens ?? "?"} tokens; budget ${event.budget_tokens ?? "?"} tokens.`),
    included.length ? h("div", {}, h("strong", {}, "Shown"), h("ul", { class: "context-included" }, included.map(row))) : null,
    leftOut.length ? h("div", {}, h("strong", {}, "Left out"), h("ul", { class: "context-left-out" }, leftOut.map(row))) : null,
  );
}

/** An error or a warning, in words. */
export function problemCard(event) {
  const { title, detail } = describeRunError(event);
  const severity = event.type === "warning" ? "warning" : event.severity === "fatal" ? "fatal" : "recoverable";
  const lines = detail.split("\n");
  const long = lines.length > 3 || detail.length > 300;
  return h(
    "div",
    { class: `card problem ${severity}`, role: severity === "fatal" ? "alert" : null },
    h("div", { class: "card-head" }, h("span", { class: "card-icon", "aria-hidden": "true" }, severity === "warning" ? "⚠" : "✖"),
      h("span", { class: "card-title" }, title)),
    detail && !long ? h("p", { class: "card-text" }, detail) : null,
    detail && long ? h("details", { class: "card-details" }, h("summary", {}, lines[0].slice(0, 160)), h("pre", { class: "card-output" }, detail)) : null,
  );
}

/** The checks after generation: fixes applied, findings left, the build, and what the render
 * check saw when it opened the app in a browser (`render`). */
export function postgenCard(event) {
  const findings = event.findings || [];
  const fixes = event.fixes || [];
  const build = event.build;
  const render = event.render;
  const ok = findings.length === 0 && (!build || build.ok) && renderOk(render);
  const parts = [];
  if (build) parts.push(build.ok ? "build passed" : `build failed (exit ${build.exit_code})`);
  if (render) parts.push(renderSummary(render));
  if (findings.length) parts.push(`${findings.length} problem${findings.length === 1 ? "" : "s"} found`);
  if (fixes.length) parts.push(`${fixes.length} fix${fixes.length === 1 ? "" : "es"} applied`);
  const items = [
    ...fixes.map((f) => h("li", {}, `Fixed ${f.path || ""}: ${f.message}`)),
    ...findings.map((f) => h("li", {}, `${f.path || ""}${f.line ? `:${f.line}` : ""} ${f.message}`)),
  ];
  return h(
    "div",
    { class: "card checks", dataset: { state: ok ? "ok" : "failed" } },
    h("div", { class: "card-head" }, h("span", { class: "card-icon", "aria-hidden": "true" }, ok ? "✔" : "✖"),
      h("span", { class: "card-title" }, `Checks: ${parts.join(", ") || "nothing to check"}`)),
    items.length ? h("details", { class: "card-details" }, h("summary", {}, "Details"), h("ul", {}, items)) : null,
    build && !build.ok && build.output ? h("details", { class: "card-details" }, h("summary", {}, "Build output"), h("pre", { class: "card-output" }, build.output)) : null,
    render ? renderDetails(render) : null,
  );
}

const RENDER_ERRORS_SHOWN = 20;

/** Whether the render check found the app working (a skipped check found nothing wrong). */
const renderOk = (render) => !render || Boolean(render.skipped) || (render.ok && !render.blank && !(render.errors || []).length);

/** "app renders", "app throws 2 errors", "page blank", "render check skipped (reason)". */
function renderSummary(render) {
  if (render.skipped) return "render check skipped";
  const errors = (render.errors || []).filter((e) => e.kind !== "blank_page").length;
  const parts = [];
  if (errors) parts.push(`app throws ${plural(errors, "error")}`);
  if (render.blank) parts.push("page blank");
  if (!parts.length) parts.push(render.ok ? "app renders" : "render check failed");
  return parts.join(", ");
}

/** The render check's findings (message, file:line) and its screenshot, folded. */
function renderDetails(render) {
  const errors = render.errors || [];
  if (render.skipped) return skippedDetails(render);
  if (!errors.length && !render.blank && !render.screenshot) return null;
  const item = (e) => h("li", {}, `${describeKind(e.kind)}: ${headline(e)}${e.count > 1 ? ` (${e.count} times)` : ""}`,
    where(e) ? h("code", {}, ` ${where(e)}`) : null);
  const items = errors.slice(0, RENDER_ERRORS_SHOWN).map(item);
  if (render.blank && !errors.some((e) => e.kind === "blank_page")) items.push(h("li", {}, "The page stayed blank: the app's root element was empty."));
  if (errors.length > RENDER_ERRORS_SHOWN) items.push(h("li", {}, `…and ${errors.length - RENDER_ERRORS_SHOWN} more`));
  // Only a path of kiln's own origin: the screenshot's URL never comes from the app's page.
  const shot = typeof render.screenshot === "string" && /^\/[^/\\]/.test(render.screenshot) ? render.screenshot : null;
  const seconds = Number.isFinite(render.seconds) ? ` (${render.seconds.toFixed(1)} s)` : "";
  return h(
    "details",
    { class: "card-details render", open: errors.length || render.blank ? true : null },
    h("summary", {}, `Render check${seconds}`),
    items.length ? h("ul", { class: "render-findings" }, items) : null,
    shot ? h("a", { href: shot, target: "_blank", rel: "noopener" }, h("img", { class: "render-screenshot", src: shot, alt: "The app as the render check saw it", loading: "lazy" })) : null,
  );
}

/** Why the render check did not run: the words of its code, and its message. */
function skippedDetails(render) {
  const words = describeCode(render.skipped) || "The render check did not run";
  const message = presentable(render.message) ? render.message.trim() : "";
  return h("p", { class: "card-text render-skipped" }, message ? `${words}: ${message}` : words);
}

const PREVIEW_ERRORS_SHOWN = 20;

/** The errors the app threw in the browser during a run (`preview_error` events): one card per
 * run, newest kept, bounded. */
export class PreviewErrorsCard {
  constructor() {
    this.count = 0;
    this.title = h("span", { class: "card-title" });
    this.list = h("ul", { class: "preview-error-list" });
    this.el = h(
      "div",
      { class: "card preview-errors", dataset: { state: "failed" } },
      h("div", { class: "card-head" }, h("span", { class: "card-icon", "aria-hidden": "true" }, "⚠"), this.title),
      this.list,
    );
  }

  add(event) {
    this.count += 1;
    this.title.textContent = `The app ${this.count === 1 ? "threw an error" : `threw ${this.count} errors`} in the browser`;
    const at = where(event);
    this.list.append(h("li", {}, `${describeKind(event.kind)}: ${headline(event)}${event.count > 1 ? ` (${event.count} times)` : ""}`,
      at ? h("code", {}, ` ${at}`) : null));
    if (this.list.childElementCount > PREVIEW_ERRORS_SHOWN) this.list.firstElementChild.remove();
  }
}

/** The marker at the start of a turn (with what kiln asked, for turns after the first). */
export function turnStartMarker(event) {
  const label = event.fixup ? `Fix-up turn (turn ${event.turn})` : `Turn ${event.turn}`;
  const showPrompt = (event.turn > 1 || event.fixup) && event.prompt;
  return h(
    "div",
    { class: "turn-marker start" },
    h("span", {}, label),
    showPrompt ? h("details", { class: "turn-prompt" }, h("summary", {}, "What kiln asked"), h("pre", {}, event.prompt)) : null,
  );
}

/** The marker at the end of a turn: why the loop stopped or went on. */
export function turnEndMarker(event) {
  const why = event.decision === "continue"
    ? `continues ${describeContinue(event.prompt)}`.trim()
    : `stopped: ${describeStop(event.reason)}`;
  return h("div", { class: `turn-marker end ${event.decision || ""}`, title: event.rule ? `rule: ${event.rule}` : null },
    h("span", {}, `Turn ${event.turn} ${why}`));
}
