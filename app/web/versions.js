// The Versions tab: a chat's project versions (one per turn that changed files), each with its
// diff, a restore button and a zip download. Restoring records a new version (history only
// grows) and writes it into the chat's sandbox; the page then refreshes its files and preview.

import { archiveUrl, listVersions, restoreVersion, versionDiff } from "./api.js";

const STATUS_WORDS = { A: "added", M: "changed", D: "removed" };

export class VersionsPanel {
  /**
   * @param {{list: HTMLElement, status: HTMLElement, title: HTMLElement, diff: HTMLElement, count: HTMLElement}} els
   * @param {(version: object) => void} onRestored  called after a restore was recorded
   */
  constructor(els, onRestored) {
    this.els = els;
    this.onRestored = onRestored;
    this.chatId = null;
    this.versions = [];
  }

  reset(chatId = null) {
    this.chatId = chatId;
    this.versions = [];
    this.els.list.replaceChildren();
    this.els.count.textContent = "";
    this.els.status.textContent = chatId ? "" : "No chat open.";
    this.els.title.textContent = "Pick a version to see its changes";
    this.els.diff.replaceChildren();
  }

  /** Fetch and show the chat's versions (newest first); resolves to them, oldest first
   * (empty when they could not be fetched or another chat opened meanwhile). */
  async load() {
    const chatId = this.chatId;
    if (!chatId) return [];
    try {
      const versions = await listVersions(chatId);
      if (chatId !== this.chatId) return [];
      this.versions = versions;
      this.render();
      return versions;
    } catch (exc) {
      if (chatId === this.chatId) this.els.status.textContent = exc.message;
      return [];
    }
  }

  /** A run event: a new version (or a restore) means the list changed. */
  apply(event) {
    if (event.type === "version") this.load();
  }

  render() {
    const { list, status, count } = this.els;
    count.textContent = this.versions.length ? String(this.versions.length) : "";
    status.textContent = this.versions.length
      ? "Each turn that changed files is a version. Restoring one makes it the newest."
      : "No versions yet: they appear when a turn writes files.";
    list.replaceChildren(...[...this.versions].reverse().map((v) => this.row(v)));
  }

  row(version) {
    const item = document.createElement("li");
    item.className = "version";
    item.dataset.version = String(version.version);
    const title = document.createElement("div");
    title.className = "version-title";
    const what = version.note || (version.turn ? `turn ${version.turn}` : "snapshot");
    title.textContent = `Version ${version.version} · ${what}`;
    const meta = document.createElement("div");
    meta.className = "version-meta";
    meta.textContent = `${new Date(version.created * 1000).toLocaleString()} · ${version.summary}`;
    const actions = document.createElement("div");
    actions.className = "version-actions";
    actions.append(
      this.button("Changes", `Show the changes of version ${version.version}`, () => this.showDiff(version)),
      this.button("Restore", `Restore version ${version.version}`, () => this.restore(version)),
      this.download(version),
    );
    item.append(title, meta, actions);
    return item;
  }

  button(text, label, onClick) {
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = text;
    button.setAttribute("aria-label", label);
    button.addEventListener("click", onClick);
    return button;
  }

  download(version) {
    const link = document.createElement("a");
    link.href = archiveUrl(this.chatId, version.version);
    link.textContent = "Download";
    link.setAttribute("download", `${this.chatId}-v${version.version}.zip`);
    link.setAttribute("aria-label", `Download version ${version.version} as a zip`);
    return link;
  }

  async showDiff(version) {
    const { title, diff } = this.els;
    title.textContent = `Changes of version ${version.version} (${version.summary})`;
    diff.replaceChildren();
    try {
      const data = await versionDiff(this.chatId, version.version);
      const lines = data.files.flatMap((file) => [
        `# ${file.path} (${STATUS_WORDS[file.status] || file.status})`,
        ...file.diff.replace(/\n$/, "").split("\n"),
      ]);
      diff.replaceChildren(...lines.map(diffLine));
      if (!data.files.length) diff.textContent = "This version changed no files.";
    } catch (exc) {
      diff.textContent = exc.message;
    }
  }

  async restore(version) {
    const { status } = this.els;
    status.textContent = `Restoring version ${version.version}…`;
    try {
      const data = await restoreVersion(this.chatId, version.version);
      await this.load();
      status.textContent = `Version ${data.restored} restored as version ${data.version.version}.`;
      this.onRestored(data);
    } catch (exc) {
      status.textContent = exc.message;
    }
  }
}

function diffLine(text) {
  const line = document.createElement("span");
  line.className = text.startsWith("# ")
    ? "diff-file"
    : text.startsWith("+") && !text.startsWith("+++")
      ? "diff-add"
      : text.startsWith("-") && !text.startsWith("---")
        ? "diff-del"
        : "diff-ctx";
  line.textContent = `${text}\n`;
  return line;
}
