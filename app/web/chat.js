// The transcript: user messages, and for each run the assistant's answer as it streams —
// thinking (collapsible), prose, cards for installs, commands, searches, files and problems,
// turn markers, and the run's final state with its tokens in and out.

import { getRun } from "./api.js";
import { EditCard, FilesCard, PreviewErrorsCard, StepCard, ToolCard, contextCard, postgenCard, problemCard, restartNotice, turnEndMarker, turnStartMarker } from "./cards.js";
import { messageImages } from "./composer_images.js";
import { h, nearBottom } from "./dom.js";
import { describeStatus, describeStop, presentable } from "./errors.js";
import { renderProse } from "./prose.js";

export class ChatView {
  /**
   * @param {HTMLElement} container  the scrolling transcript
   * @param {(path: string) => void} onOpenFile
   * @param {HTMLButtonElement} newButton  "↓ new", shown when something arrives below the view
   */
  constructor(container, onOpenFile, newButton) {
    this.container = container;
    this.onOpenFile = onOpenFile;
    this.newButton = newButton;
    // Following the end: kept while the person is at the bottom, dropped when they scroll up.
    // Whatever changes the transcript (events, prose rendered a frame later, cards opening)
    // then keeps it at its end, or shows "↓ new".
    this.following = true;
    container.addEventListener("scroll", () => this.scrolled());
    // A wheel or key turn upwards stops following at once, before the next change pulls back.
    container.addEventListener("wheel", (event) => { if (event.deltaY < 0) this.following = false; }, { passive: true });
    newButton.addEventListener("click", () => this.toEnd());
    new MutationObserver(() => this.changed()).observe(container, { childList: true, subtree: true, characterData: true });
    new ResizeObserver(() => this.changed()).observe(container);
  }

  clear() {
    this.container.replaceChildren();
    this.toEnd(); // a chat opens at its end
  }

  /** Go to the end and follow it from now on. */
  toEnd() {
    this.following = true;
    this.newButton.hidden = true;
    this.container.scrollTop = this.container.scrollHeight;
  }

  scrolled() {
    this.following = nearBottom(this.container);
    if (this.following) this.newButton.hidden = true;
  }

  changed() {
    if (this.following) this.container.scrollTop = this.container.scrollHeight;
    else if (this.container.scrollHeight > this.container.clientHeight) this.newButton.hidden = false;
  }

  /** The empty state of a new chat, with example requests that fill the composer. */
  showIntro(onPick) {
    const examples = ["A todo app with a list I can tick off", "A pomodoro timer with start and reset", "A tip calculator"];
    this.container.replaceChildren(
      h("div", { class: "intro" },
        h("h2", {}, "What should kiln build?"),
        h("p", {}, "Describe an app. kiln writes the files, installs packages and shows a live preview while it works."),
        h("div", { class: "examples" }, examples.map((text) => h("button", { type: "button", class: "example", onclick: () => onPick(text) }, text)))),
    );
  }

  /** Append a user message. */
  addUser(content, imageSources = [], selection = null) {
    this.container.querySelector(".intro")?.remove();
    this.container.append(h("div", { class: "msg user" }, messageImages(imageSources), h("div", { class: "bubble" }, content, selection)));
    this.toEnd(); // a message sent: its answer is what the person wants to see
  }

  /** Append a line about something done without a run (a text edited in place, say). */
  addNote(text, kind = "done") {
    this.container.querySelector(".intro")?.remove();
    this.container.append(h("div", { class: `msg chat-note ${kind}`, role: "status" }, text));
  }

  /** Append the answer of a run; returns its RunView. */
  addRun(runId) {
    this.container.querySelector(".intro")?.remove();
    // Changes are followed by the observers: a run view only renders.
    const view = new RunView(runId, this.onOpenFile, (change) => change());
    this.container.append(view.el);
    return view;
  }
}

export class RunView {
  constructor(runId, onOpenFile, keepScrolled) {
    this.runId = runId;
    this.onOpenFile = onOpenFile;
    this.keepScrolled = keepScrolled;
    this.body = h("div", { class: "run-body" });
    this.footer = h("div", { class: "run-footer", dataset: { state: "running" } }, h("span", { class: "spinner", "aria-hidden": "true" }), "Working…");
    this.el = h("div", { class: "msg assistant", dataset: { run: runId } }, this.body, this.footer);
    this.block = null; // the prose block text goes on in
    this.thinking = null; // the open thinking block
    this.held = []; // "unclosed" parse errors, shown at the turn's end unless it was cancelled
    this.shown = new Set(); // error messages already on screen (the footer does not repeat them)
    this.filesCard = null;
    this.installs = []; // install cards waiting to start, in order
    this.commands = []; // command cards waiting to start, in order
    this.running = null; // the card that receives `output` lines
    this.tools = [];
    this.edits = new Map(); // path -> the card of its edit in progress (or last ended)
    this.renderPending = new Set();
    this.finished = false;
    this.unchanged = false; // the run's session_complete said it recorded no new version
    this.cards = []; // every step, tool and edit card: those still open are closed at the end
    this.starts = 0; // run_started events seen: more than one means a worker took it over
  }

  /** Render one event of this run. */
  apply(event) {
    this.keepScrolled(() => this.dispatch(event));
  }

  dispatch(event) {
    const handler = HANDLERS[event.type];
    if (handler) handler.call(this, event);
  }

  append(node) {
    this.body.append(node);
    this.block = null;
    return node;
  }

  proseBlock() {
    if (this.block?.kind !== "prose") {
      const el = this.append(h("div", { class: "prose" }));
      this.block = { kind: "prose", el, text: "" };
    }
    return this.block;
  }

  thinkingBlock() {
    if (!this.thinking) {
      const text = h("div", { class: "thinking-text" });
      const summary = h("summary", {}, h("span", { class: "spinner", "aria-hidden": "true" }), "Thinking…");
      const el = this.append(h("details", { class: "thinking", open: true }, summary, text));
      this.thinking = { el, summary, textEl: text, text: "" };
    }
    return this.thinking;
  }

  renderLater(block) {
    // Re-rendering prose per token would be quadratic work; once per frame is enough.
    if (this.renderPending.has(block)) return;
    this.renderPending.add(block);
    requestAnimationFrame(() => {
      this.renderPending.delete(block);
      this.keepScrolled(() => (block.el.innerHTML = renderProse(block.text)));
    });
  }

  step(kind, title, queue) {
    const card = new StepCard(kind, title);
    this.append(card.el);
    this.cards.push(card);
    queue.push(card);
    return card;
  }

  /** End every card still waiting or running (the run ended, or its worker stopped, first):
   * no card stays "running…" after its run. */
  closeOpenCards(label) {
    for (const card of this.cards) if (card.open) card.stop(label);
    this.installs = [];
    this.commands = [];
    this.running = null;
    this.tools = [];
    this.filesCard?.close();
  }

  started(queue, kind, title) {
    const card = queue.shift() || this.step(kind, title, []);
    card.start();
    this.running = card;
    return card;
  }

  finishedStep(card, event) {
    if (card) card.finish(event.exit_code, Boolean(event.already_installed));
    if (this.running === card) this.running = null;
  }

  /** The run's terminal state, shown under its answer. */
  finish(event) {
    this.finished = true;
    const status = event.status || "failed";
    const quiet = ["cancelled", "error"].includes(event.stop_reason);
    const reason = event.stop_reason && !quiet ? ` · ${describeStop(event.stop_reason)}` : "";
    this.footer.dataset.state = status;
    const unchanged = this.unchanged && status === "completed";
    const state = unchanged ? "No changes: the answer wrote the same files again" : describeStatus(status);
    this.footer.replaceChildren(h("span", { class: "run-state" }, state), unchanged ? "" : reason);
    const error = typeof event.error === "string" ? event.error : event.error?.message;
    if (status === "failed" && presentable(error) && !this.shown.has(error.trim())) {
      this.footer.append(h("p", { class: "run-error" }, error));
    }
    this.thinkingDone();
    if (status !== "cancelled") this.held.forEach((held) => this.body.append(problemCard(held)));
    this.held = [];
    this.closeOpenCards(status === "cancelled" ? "cancelled" : "not finished");
    this.showUsage();
  }

  /** The run's tokens in and out, from `GET /api/runs/{id}` (the terminal event carries none). */
  async showUsage() {
    let run;
    try {
      run = await getRun(this.runId);
    } catch {
      return; // the footer goes without: the state above is what matters
    }
    const text = describeUsage(run.usage);
    if (!text) return;
    const usage = h("span", { class: "run-usage", title: "Tokens the provider reported for this run" }, text);
    this.footer.insertBefore(usage, this.footer.querySelector(".run-error")); // on the state's line
  }

  thinkingDone() {
    if (!this.thinking) return;
    const { el, summary } = this.thinking;
    el.open = false;
    el.classList.add("closed");
    summary.replaceChildren("Thinking");
    this.thinking = null;
  }

  tool(kind, request) {
    const card = new ToolCard(kind, request);
    this.append(card.el);
    this.cards.push(card);
    this.tools.push(card);
  }

  /** Mark the edit a refusal names (its path is quoted in the message) as not applied. */
  refusedEdit(event) {
    const message = event.message || "";
    const pending = [...this.edits.values()].filter((card) => card.el.dataset.state === "running");
    const named = pending.find((card) => message.includes(`'${card.path}'`));
    (named || pending[pending.length - 1])?.refused();
  }

  /** The footer while the run is queued or cancelling. */
  setPending(text) {
    if (this.finished) return;
    this.footer.replaceChildren(h("span", { class: "spinner", "aria-hidden": "true" }), text);
  }
}

const COUNT = new Intl.NumberFormat("en");
// An edit's refusal comes as an error naming the file in its message (no path field).
const REFUSED_EDIT_CODES = new Set(["edit_no_match", "edit_ambiguous", "malformed_edit_block", "config_refused"]);

/** "1,234 tokens in · 567 out" from a run's usage (`{turns: [{input_tokens, output_tokens,
 * estimated?}]}`), "≈… (estimated)" when kiln counted a turn itself (a server that reports no
 * usage); "" when nothing was counted (a run that never reached the model). */
export function describeUsage(usage) {
  const turns = Array.isArray(usage?.turns) ? usage.turns : [];
  const sum = (key) => turns.reduce((total, turn) => total + (Number(turn[key]) || 0), 0);
  const tokensIn = sum("input_tokens");
  const tokensOut = sum("output_tokens");
  if (!tokensIn && !tokensOut) return "";
  const about = turns.some((turn) => turn.estimated) ? "≈" : "";
  const text = ` · ${about}${COUNT.format(tokensIn)} tokens in · ${about}${COUNT.format(tokensOut)} out`;
  return about ? `${text} (estimated)` : text;
}

const HANDLERS = {
  run_started(event) {
    this.starts += 1;
    if (this.starts > 1 || event.attempt > 1) {
      // Another worker claimed the run after the first stopped: what follows is attempt 2's.
      this.thinkingDone();
      this.closeOpenCards("interrupted");
      this.append(restartNotice(event));
    }
    this.setPending("Working…");
  },
  text(event) {
    // Whitespace between tags is not prose; it would only leave empty blocks behind.
    if (this.block?.kind !== "prose" && !event.content.trim()) return;
    const block = this.proseBlock();
    block.text += event.content;
    this.renderLater(block);
  },
  thinking_start() {
    this.thinkingBlock();
  },
  thinking_content(event) {
    const block = this.thinkingBlock();
    block.text += event.content;
    block.textEl.textContent = block.text.trimStart();
  },
  thinking_end() {
    this.thinkingDone();
  },
  sandbox_start(event) {
    this.filesCard = new FilesCard(this.onOpenFile, event.project);
    this.append(this.filesCard.el);
  },
  file_start(event) {
    if (!this.filesCard) HANDLERS.sandbox_start.call(this, {});
    this.filesCard.start(event.path);
  },
  file_end(event) {
    this.filesCard?.end(event.path);
  },
  sandbox_end() {
    this.filesCard?.close();
  },
  rollback(event) {
    if (!this.filesCard && (event.rolled_back || []).length) HANDLERS.sandbox_start.call(this, {});
    this.filesCard?.rollBack(event.rolled_back || []);
  },
  install_content(event) {
    const packages = event.dependencies || [];
    if (packages.length) this.step("install", `Install ${packages.join(", ")}`, this.installs);
  },
  install_started(event) {
    this.started(this.installs, "install", `Install ${(event.packages || []).join(", ")}`);
  },
  install_finished(event) {
    this.finishedStep(this.running?.kind === "install" ? this.running : null, event);
  },
  command(event) {
    this.step("command", [event.command, ...(event.args || [])].join(" "), this.commands);
  },
  command_started(event) {
    this.started(this.commands, "command", (event.argv || []).join(" "));
  },
  command_finished(event) {
    this.finishedStep(this.running?.kind === "command" ? this.running : null, event);
  },
  output(event) {
    this.running?.addOutput(event.line ?? "");
  },
  web_search(event) {
    this.tool("web_search", event.query);
  },
  url_scrape(event) {
    this.tool("url_scrape", event.url);
  },
  tool_result(event) {
    const index = this.tools.findIndex((card) => card.request === event.request);
    const card = index >= 0 ? this.tools.splice(index, 1)[0] : this.tools.shift();
    card?.result(event);
  },
  context(event) {
    this.append(contextCard(event));
  },
  read(event) {
    this.tool("read", event.path);
  },
  edit_start(event) {
    const card = new EditCard(event.path, this.onOpenFile);
    this.cards.push(card);
    this.edits.set(event.path, card);
    this.append(card.el);
  },
  edit_block(event) {
    this.edits.get(event.path)?.block();
  },
  edit_applied(event) {
    this.edits.get(event.path)?.applied(event.blocks);
  },
  file_written(event) {
    // An edit's result is written like any file; a write path without `edit_applied` says so.
    const card = this.edits.get(event.path);
    if (card?.el.dataset.state === "running") card.applied();
  },
  error(event) {
    if (event.code === "command_refused" && this.commands.length) this.commands.shift().refuse();
    if (REFUSED_EDIT_CODES.has(event.code)) this.refusedEdit(event);
    // A cancel cuts the answer short, so the parser reports its open tags: that is no news.
    if (event.code === "unclosed_tag") this.held.push(event);
    else this.append(problemCard(event));
    this.shown.add((event.message || "").trim());
  },
  warning(event) {
    this.append(problemCard(event));
  },
  postgen(event) {
    this.append(postgenCard(event));
  },
  preview_error(event) {
    if (!this.previewErrors) {
      this.previewErrors = new PreviewErrorsCard();
      this.append(this.previewErrors.el);
    }
    this.previewErrors.add(event);
  },
  turn_start(event) {
    this.append(turnStartMarker(event));
  },
  turn_end(event) {
    this.thinkingDone();
    if (event.reason !== "cancelled") this.held.forEach((held) => this.append(problemCard(held)));
    this.held = [];
    this.append(turnEndMarker(event));
  },
  session_complete(event) {
    this.unchanged = Boolean(event.unchanged);
  },
  run_finished(event) {
    this.finish(event);
  },
};
