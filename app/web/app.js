// kiln's web UI: sign-in, the chat list, a chat's transcript, and the workspace (preview,
// files, log) of the run being followed. Opening a chat replays every run's events (they are
// persisted with a sequence number) so a page reload shows exactly what was there, and an
// active run then goes on streaming live.

import * as api from "./api.js";
import { ChatView } from "./chat.js";
import { ChatActions } from "./chatactions.js";
import { Composer } from "./composer.js";
import { ComposerImages, storedImageUrls } from "./composer_images.js";
import { describeStatus } from "./errors.js";
import { RunStream } from "./events.js";
import { FilesPanel } from "./files.js";
import { GitRemoteForm, ImportForm } from "./gitremote.js";
import { Tabs, showView, wireNarrowLayout } from "./layout.js";
import { LogPanel } from "./logpanel.js";
import { PreviewPanel } from "./preview.js";
import { SelectMode, keptSelection } from "./select_mode.js";
import { PreviewConsole } from "./previewconsole.js";
import { PreviewErrorStream } from "./previewerrors.js";
import { PROVIDERS, Settings } from "./settings.js";
import { renderChatList } from "./sidebar.js";
import { TextEdits, appliedWords, editNotes, refusedWords } from "./textedit.js";
import { VersionsPanel } from "./versions.js";
import { EnvPanel } from "./envpanel.js";

// The page's elements exist (index.html); the caller's context says which kind each one is.
const $ = /** @type {<T extends HTMLElement = HTMLElement>(id: string) => T} */ (
  (id) => document.getElementById(id)
);
const TERMINAL = new Set(["completed", "failed", "cancelled"]);

const state = {
  me: null,
  chats: [],
  chatId: null,
  generation: 0, // bumped whenever another chat opens; stale loops stop
  streams: new Set(),
  activeRun: null, // {id, view} of the run being followed live
};

const chat = new ChatView($("messages"), (path) => openFile(path), $("jump-new"));
const files = new FilesPanel({ tree: $("file-tree"), path: $("code-path"), code: $("code-view"), count: $("files-count") });
const log = new LogPanel({ view: $("log-view"), badge: $("log-count") });
const previewConsole = new PreviewConsole({
  bar: $("preview-error-bar"), barText: $("preview-error-text"), fix: $("preview-fix"), dismiss: $("preview-error-dismiss"),
  toggle: $("preview-console-toggle"), view: $("preview-console"), lines: $("preview-console-lines"), clear: $("preview-console-clear"),
}, (content) => send(content), () => state.me?.limits?.message_chars || 4000);
const previewErrors = new PreviewErrorStream((error) => previewConsole.add(error));
const preview = new PreviewPanel({
  frame: $("preview-frame"), overlay: $("preview-overlay"), state: $("preview-state"),
  address: $("preview-address"), reload: $("preview-reload"), open: $("preview-open"),
}, api.previewLogin, api.previewState, {
  follow: (sandboxId) => previewErrors.follow(sandboxId),
  reloaded: () => {
    previewConsole.clear();
    previewErrors.retry();
  },
});
const selectMode = new SelectMode({ toggle: $("preview-select"), frame: $("preview-frame"), chips: $("selection-chips") },
  () => preview.url, () => {}); // a text edit is applied in place by TextEdits (below)
const envPanel = new EnvPanel({
  list: $("env-list"), status: $("env-status"), form: $("env-form"), name: $("env-name"),
  value: $("env-value"), secret: $("env-secret"), hint: $("env-hint"), count: $("env-count"),
});
const versions = new VersionsPanel({
  list: $("versions-list"), status: $("versions-status"), title: $("diff-title"), diff: $("diff-view"), count: $("versions-count"),
  publication: $("publication"),
}, () => afterRestore());
const remoteForm = new GitRemoteForm({
  form: $("remote-form"), url: $("remote-url"), branch: $("remote-branch"), token: $("remote-token"),
  push: $("remote-push"), status: $("remote-status"),
});
new ImportForm({
  form: $("import-form"), url: $("import-url"), branch: $("import-branch"), token: $("import-token"),
  submit: $("import-submit"), status: $("import-status"),
}, (created) => {
  state.chats = [created, ...state.chats.filter((c) => c.id !== created.id)];
  history.replaceState(null, "", `#/chats/${encodeURIComponent(created.id)}`);
  openChat(created.id);
});
const tabs = new Tabs($("workspace-tabs"), (name) => name === "log" && log.seen());
const narrow = { menu: $("menu-button"), scrim: $("scrim"), sidebar: $("sidebar"), switchButtons: [...document.querySelectorAll("[data-view]")] };
const settings = new Settings({
  dialog: $("settings-dialog"), form: $("settings-form"), provider: $("settings-provider"),
  modelSelect: $("settings-demo"), modelInput: $("settings-model"), modelLabel: $("settings-model-label"),
  keyRow: $("settings-key-row"), keyInput: $("settings-key"), keyNote: $("settings-key-note"),
  saveKey: $("settings-save-key"), deleteKey: $("settings-delete-key"), status: $("settings-status"), close: $("settings-close"),
  signOut: $("settings-sign-out"), signOutEverywhere: $("settings-sign-out-everywhere"),
}, () => showChoice());
const composer = new Composer({
  form: $("composer"), input: $("message-input"), send: $("send-button"), count: $("message-count"),
}, (content) => send(content));
const composerImages = new ComposerImages({
  form: $("composer"), input: $("message-input"), tray: $("composer-images"), pick: $("attach-button"), file: $("attach-input"), error: $("composer-images-error"),
});
// Text edited in place in the preview (textedit.js): applied without a model, or suggested.
new TextEdits({
  chatId: () => state.chatId,
  frame: $("preview-frame"),
  origin: () => (preview.url ? new URL(preview.url).origin : null),
  applied: (answer) => textEdited(answer),
  refused: (suggestion, reason, edit) => {
    chat.addNote(refusedWords(reason), "refused");
    selectMode.add({ ...edit, text: edit.old_text }); // the message asks the model about it
    composer.fill(suggestion);
  },
});
const chatActions = new ChatActions({
  dialog: $("delete-dialog"), text: $("delete-text"), confirm: $("delete-confirm"), cancel: $("delete-cancel"), status: $("delete-status"),
}, { renamed: (chat) => chatRenamed(chat), deleted: (chatId) => chatDeleted(chatId), failed: (exc) => handleFailure(exc) });

/** Announce `text` in the polite live region (and show it under the transcript). */
function announce(text) {
  if ($("run-status").textContent !== text) $("run-status").textContent = text;
}

function showError(text) {
  const box = $("page-error");
  box.textContent = text;
  box.hidden = !text;
}

function showChoice() {
  const choice = settings.effective();
  const badge = $("provider-badge");
  const notice = $("demo-notice");
  if (choice.demo) {
    badge.textContent = `Demo · ${choice.model}`;
    notice.hidden = false;
    const replay = `kiln replays the recording “${choice.model}”, whatever you ask`;
    notice.textContent = choice.reason === "no-key" ? `Demo mode: ${whatIsMissing(choice.wanted, replay)}` : `Demo mode: ${replay}.`;
  } else {
    // No model named: the server's own default (an OpenAI-compatible server's, say).
    badge.textContent = `${PROVIDERS[choice.provider]?.label || choice.provider} · ${choice.model || "server's default model"}`;
    notice.hidden = true;
  }
}

/** Why the chosen provider cannot be used, and what to do: a key, or (a server needing no key)
 * its base URL, which only the operator can set. */
function whatIsMissing(wanted, replay) {
  const label = PROVIDERS[wanted]?.label || wanted;
  if (wanted && PROVIDERS[wanted]?.keyOptional) {
    return `the ${label} is not set up on this kiln (its operator sets KILN_OPENAI_COMPATIBLE_BASE_URL), so ${replay}.`;
  }
  const missing = wanted ? `no API key for ${label}` : "no API key is set";
  return `${missing}, so ${replay}. Add a key in Settings.`;
}

// ---- sign-in and start-up -------------------------------------------------------------

async function boot() {
  sessionStorage.removeItem("kiln.reloads"); // the page loaded: a later failure may reload again
  wireStatic();
  try {
    state.me = await api.me();
  } catch (exc) {
    if (exc.status === 401) return showSignIn();
    $("signin").hidden = false;
    $("signin-error").textContent = exc.message;
    return undefined;
  }
  $("signin").hidden = true;
  $("user-name").textContent = state.me.user?.name || "";
  settings.setMe(state.me);
  composer.setLimit(state.me.limits?.message_chars);
  showChoice();
  await refreshChats();
  if (!$("signin").hidden) return undefined; // the session ended meanwhile
  window.addEventListener("hashchange", route);
  // The composer shows only once the route has opened its chat: a message sent earlier raced
  // the route, which then opened the new chat a second time (its run shown twice).
  const routed = route();
  $("app").hidden = false;
  return routed;
}

function showSignIn() {
  $("app").hidden = true;
  $("signin").hidden = false;
  $("signin-link").focus();
}

function wireStatic() {
  $("signin-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const raw = /** @type {HTMLInputElement} */ ($("signin-link")).value.trim();
    const token = /[?&]token=([^&#\s]+)/.exec(raw)?.[1] || (/^[\w-]+$/.test(raw) ? raw : null);
    if (!token) {
      $("signin-error").textContent = "That does not look like a kiln sign-in link (it contains “/login?token=”).";
      return;
    }
    window.location.assign(`/login?token=${encodeURIComponent(decodeURIComponent(token))}`);
  });
  $("new-chat").addEventListener("click", () => newChat());
  $("settings-button").addEventListener("click", () => settings.open());
  $("provider-badge").addEventListener("click", () => settings.open());
  $("cancel-button").addEventListener("click", () => cancel());
  wireNarrowLayout(narrow);
  tabs.show("preview");
}

// ---- chats ----------------------------------------------------------------------------

async function refreshChats() {
  try {
    state.chats = await api.listChats();
  } catch (exc) {
    return handleFailure(exc);
  }
  showChatList();
  return undefined;
}

function showChatList() {
  renderChatList($("chat-list"), state.chats, state.chatId, chatActions);
}

/** A chat was renamed in the sidebar: its entry, and the page title if it is open. */
function chatRenamed(renamed) {
  state.chats = state.chats.map((c) => (c.id === renamed.id ? { ...c, ...renamed } : c));
  if (renamed.id === state.chatId) document.title = `${renamed.title} · kiln`;
  showChatList();
}

/** A chat was deleted: it leaves the list; if it was open, a new chat takes its place. */
function chatDeleted(chatId) {
  state.chats = state.chats.filter((c) => c.id !== chatId);
  if (chatId === state.chatId) newChat();
  else showChatList();
}

function route() {
  const match = /^#\/chats\/([^/]+)$/.exec(window.location.hash);
  return openChat(match ? decodeURIComponent(match[1]) : null);
}

function newChat() {
  if (window.location.hash) window.location.hash = "";
  else openChat(null);
  composer.focus();
}

function resetWorkspace() {
  state.generation += 1;
  for (const stream of state.streams) stream.close();
  state.streams.clear();
  state.activeRun = null;
  files.reset();
  log.reset();
  preview.reset();
  selectMode.reset();
  versions.reset();
  remoteForm.reset();
  envPanel.reset();
  tabs.auto = true;
  tabs.show("preview");
  setRunning(false);
  showError("");
  announce("");
}

async function openChat(chatId) {
  resetWorkspace();
  state.chatId = chatId;
  showChatList();
  showView(narrow, "chat");
  if (!chatId) {
    document.title = "kiln";
    chat.showIntro((text) => composer.fill(text));
    return;
  }
  const generation = state.generation;
  chat.clear();
  versions.reset(chatId);
  const versionsLoaded = versions.load(); // beside the chat: the transcript places text edits
  let data;
  try {
    data = await api.getChat(chatId);
  } catch (exc) {
    handleFailure(exc);
    return;
  }
  if (generation !== state.generation) return;
  document.title = `${data.chat.title} · kiln`;
  remoteForm.reset(chatId);
  remoteForm.load();
  envPanel.reset(chatId);
  envPanel.load();
  await replayChat(data, generation, versionsLoaded);
}

/** Render a chat's messages and replay its runs in order, with the text edits made between
 * them (from its `versions`); follow the active run live. */
async function replayChat(data, generation, versionsLoaded) {
  const runs = [...data.runs].sort((a, b) => a.created - b.created);
  const users = data.messages.filter((m) => m.role === "user").sort((a, b) => a.created - b.created);
  const notes = editNotes(await versionsLoaded);
  if (generation !== state.generation) return;
  const notesUntil = (time) => {
    while (notes.length && notes[0].created < time) chat.addNote(notes.shift().text);
  };
  if (!runs.length && !users.length) chat.showIntro((text) => composer.fill(text));
  const shown = runs.filter((run) => run.preview_url).at(-1);
  if (shown) preview.setUrl(shown.preview_url, shown.sandbox_id);
  else if (data.chat.sandbox_id) previewSandbox(data.chat.sandbox_id, generation); // an imported app
  for (const [index, message] of users.entries()) {
    notesUntil(message.created);
    chat.addUser(message.content, storedImageUrls(data.chat.id, message.images), keptSelection(message.data));
    const run = runs[index];
    if (!run) continue;
    await followRun(run.id, { live: !TERMINAL.has(run.status), generation });
    if (generation !== state.generation) return;
  }
  notesUntil(Infinity);
  const sandboxId = data.chat.sandbox_id || runs.at(-1)?.sandbox_id;
  if (sandboxId && !state.activeRun) await mergeWorkspace(sandboxId, generation);
}

async function mergeWorkspace(sandboxId, generation) {
  try {
    const listing = await api.listFiles(sandboxId);
    if (generation === state.generation) await files.loadWorkspace(listing, sandboxId);
  } catch {
    // The sandbox may be gone (reaped); the files the events named are still shown.
  }
}

// ---- runs -----------------------------------------------------------------------------

/** Stream a run's events into a new transcript entry; resolves when the run is over. */
function followRun(runId, { live, generation }) {
  const view = chat.addRun(runId);
  if (live) startLive(runId, view);
  const stream = new RunStream(runId, {
    onEvent: (_seq, event) => handleEvent(view, event, live),
    onState: (s) => live && connectionState(s),
  });
  state.streams.add(stream);
  stream.start();
  return stream.finished.then(() => {
    state.streams.delete(stream);
    if (live && generation === state.generation) endLive(runId);
  });
}

function startLive(runId, view) {
  state.activeRun = { id: runId, view };
  setRunning(true);
  files.startRun();
  tabs.auto = true;
  preview.waiting();
  preview.build();
}

function endLive(runId) {
  if (state.activeRun?.id !== runId) return;
  state.activeRun = null;
  setRunning(false);
  preview.stopBuilding();
  api.getRun(runId).then((run) => {
    // The finished app: a preview opened mid-run loads again (setUrl loads a new one itself).
    if (!run.preview_url) preview.idle();
    else if (!preview.setUrl(run.preview_url, run.sandbox_id)) preview.runEnded();
    if (run.sandbox_id) mergeWorkspace(run.sandbox_id, state.generation);
    if (preview.url) tabs.follow("preview");
  }).catch(() => {});
}

function connectionState(s) {
  if (s === "reconnecting") announce("Connection lost. Reconnecting…");
  else if (s === "live" && $("run-status").textContent.startsWith("Connection lost")) announce("Reconnected.");
}

const ACTIVITY = {
  run_started: () => "Working…",
  thinking_start: () => "Thinking…",
  text: () => "Writing the answer…",
  file_start: (e) => `Writing ${e.path}…`,
  install_started: () => "Installing packages…",
  command_started: (e) => `Running ${(e.argv || []).join(" ")}…`,
  postgen: () => "Checking the app…",
  restore: (e) => e.phase === "started" ? `Restoring your project (version ${e.version})…` : "Project restored.",
};

/** A text was edited in place: say so, and show the new version and the file as it is now. */
function textEdited(answer) {
  chat.addNote(appliedWords(answer));
  versions.load();
  if (preview.sandboxId) mergeWorkspace(preview.sandboxId, state.generation);
}

/** A version was restored into the sandbox: show its files and reload the preview. */
function afterRestore() {
  const sandboxId = preview.sandboxId;
  if (sandboxId) mergeWorkspace(sandboxId, state.generation);
  if (preview.url) preview.reload();
}

function handleEvent(view, event, live) {
  view.apply(event);
  const path = files.apply(event);
  log.apply(event);
  if (!live) return;
  versions.apply(event);
  const activity = ACTIVITY[event.type];
  if (activity) announce(activity(event));
  if (path && event.type === "file_start") tabs.follow("files");
  if (event.type === "sandbox_ready" && event.sandbox_id) previewSandbox(event.sandbox_id, state.generation);
  if (event.type === "preview_ready") preview.complete();
  if (event.type === "run_finished") announce(`Finished: ${describeStatus(event.status)}.`);
}

/** Show the live preview of a sandbox whose id is all we know yet (the run is under way). */
async function previewSandbox(sandboxId, generation) {
  if (preview.url) return;
  try {
    // The sign-in link is on the preview's own host: its origin is the preview's address.
    const link = await api.previewLogin(sandboxId);
    if (generation === state.generation) preview.setUrl(`${new URL(link).origin}/`, sandboxId);
  } catch {
    // Not reachable yet; the run's end brings the URL again.
  }
}

function setRunning(running) {
  const cancel = /** @type {HTMLButtonElement} */ ($("cancel-button"));
  cancel.hidden = !running;
  cancel.disabled = false;
  composer.setRunning(running);
  previewConsole.setRunning(running);
  document.body.classList.toggle("running", running);
}

/** Send a message (the composer allows one at a time); whether the server accepted it. A chat
 * is created with its first message, in one request: a refused message leaves no empty chat. */
async function send(content) {
  showError("");
  const choice = settings.effective();
  const images = composerImages.payload();
  const selection = selectMode.selection();
  const message = {
    content, provider: choice.provider, model: choice.model,
    ...(images.length ? { images } : {}), ...(selection.length ? { selection } : {}),
  };
  const sources = composerImages.sources();
  const generation = state.generation;
  let runId;
  try {
    runId = state.chatId ? (await api.sendMessage(state.chatId, message)).run_id : await startChat(message, generation);
  } catch (exc) {
    if (generation !== state.generation) return false;
    if (busyElsewhere(exc)) showRunElsewhere();
    else handleFailure(exc);
    return false;
  }
  composerImages.clear();
  // Another chat was opened while the request was out: this run shows when its chat is opened.
  selectMode.clear(); // accepted: the selection went with it
  if (generation !== state.generation) return true;
  chat.addUser(content, sources, keptSelection(message));
  announce("Waiting for a worker…");
  followRun(runId, { live: true, generation });
  return true;
}

/** Whether a message was refused because this chat already has a run going: one started in
 * another tab or window, which this page did not know of. */
const busyElsewhere = (exc) => exc.code === "admission_refused" && exc.detail?.error?.limit === "chat" && state.chatId;

/** Open this chat again, which follows its running run live, and say why the message waits
 * (the composer keeps it). */
function showRunElsewhere() {
  openChat(state.chatId); // not awaited: it resolves when the run ends
  showError("This chat is already building, started in another tab or window: its run is shown here. Send your message again once it is done.");
}

/** Create a chat with its first message; its run id. The chat is shown unless another chat
 * was opened meanwhile (it is listed either way). */
async function startChat(message, generation) {
  const started = await api.startChat(message.content.slice(0, 80), message);
  const created = started.chat;
  state.chats = [created, ...state.chats.filter((c) => c.id !== created.id)];
  if (generation === state.generation) {
    state.chatId = created.id;
    history.replaceState(null, "", `#/chats/${encodeURIComponent(created.id)}`);
    document.title = `${created.title} · kiln`;
    chat.clear();
    versions.reset(created.id);
    envPanel.reset(created.id);
  }
  showChatList();
  return started.run_id;
}

async function cancel() {
  const run = state.activeRun;
  if (!run) return;
  /** @type {HTMLButtonElement} */ ($("cancel-button")).disabled = true;
  run.view.setPending("Cancelling…");
  announce("Cancelling…");
  try {
    await api.cancelRun(run.id);
  } catch (exc) {
    if (exc.status !== 409) handleFailure(exc); // 409: it finished meanwhile
  }
}

function openFile(path) {
  tabs.auto = false;
  tabs.show("files");
  showView(narrow, "workspace");
  files.select(path, { byUser: true });
}

function handleFailure(exc) {
  console.warn(exc);
  if (exc.status === 401) return showSignIn();
  showError(exc.message || "Something went wrong.");
  return undefined;
}

boot();
