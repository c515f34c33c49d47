// The Versions tab: a chat's project versions (one per turn that changed files), each with its
// diff, a restore button, a publish button and a zip download. Restoring records a new version
// (history only grows) and writes it into the chat's sandbox; the page then refreshes its files
// and preview. Publishing builds a version and serves it at the chat's public link, shown above
// the list with the version it serves, a copy button and Unpublish. A publish is a job on the
// server: its progress (from the job's own event stream) shows above the link, and a reload
// picks a running job up again.

import {
  archiveUrl, getPublication, getPublishJob, listVersions, publishJobEventsUrl, publishVersion,
  restoreVersion, unpublish, versionDiff,
} from "./api.js";
import { describeCode, presentable } from "./errors.js";

const STATUS_WORDS = { A: "added", M: "changed", D: "removed" };
const STAGE_WORDS = {
  queued: "waiting to start",
  building: "building it for production (installing packages, running the build)…",
  storing: "storing the build and moving the link…",
  live: "published.",
  failed: "failed.",
};

export class VersionsPanel {
  /**
   * @param {{list: HTMLElement, status: HTMLElement, title: HTMLElement, diff: HTMLElement, count: HTMLElement, publication: HTMLElement}} els
   * @param {(version: object) => void} onRestored  called after a restore was recorded
   */
  constructor(els, onRestored) {
    this.els = els;
    this.onRestored = onRestored;
    this.chatId = null;
    this.versions = [];
    this.publication = null; // {slug, url, published, version}, or null: never published
    this.job = null; // the chat's newest publish job {id, version, stage, active, code, message}
    this.jobEvents = null; // the EventSource following a running job
  }

  reset(chatId = null) {
    this.stopFollowing();
    this.chatId = chatId;
    this.versions = [];
    this.publication = null;
    this.job = null;
    this.els.publication.replaceChildren();
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
      const [versions, publication, job] = await Promise.all([
        listVersions(chatId), getPublication(chatId), getPublishJob(chatId),
      ]);
      if (chatId !== this.chatId) return [];
      this.versions = versions;
      this.publication = publication;
      this.job = job;
      this.render();
      if (job && job.active) this.follow();
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
    this.renderPublication();
  }

  /** The public link: where it is, which version it serves, copy and unpublish. */
  renderPublication() {
    const box = this.els.publication;
    const live = this.publication && this.publication.published ? this.publication : null;
    if (!this.versions.length && !live) {
      box.replaceChildren();
      return;
    }
    const head = document.createElement("div");
    head.className = "publication-state";
    const progress = this.jobProgress();
    if (!live) {
      head.textContent = "Not published. Publish a version to get a public link anyone can open.";
      box.replaceChildren(head, ...progress);
      return;
    }
    head.textContent = `Published: version ${live.version}`;
    const link = document.createElement("a");
    link.className = "publication-link";
    link.href = live.url;
    link.target = "_blank";
    link.rel = "noopener noreferrer";
    link.textContent = live.url;
    const actions = document.createElement("div");
    actions.className = "publication-actions";
    actions.append(
      this.button("Copy link", "Copy the public link", () => this.copyLink(live.url)),
      this.button("Unpublish", "Unpublish the app", () => this.unpublish()),
    );
    box.replaceChildren(head, link, actions, ...progress);
  }

  /** The newest publish job's progress, or its failure in words (nothing once it is live). */
  jobProgress() {
    const job = this.job;
    if (!job || (!job.active && job.stage !== "failed")) return [];
    const line = document.createElement("div");
    line.className = "publish-progress";
    line.dataset.stage = job.stage;
    line.setAttribute("role", "status");
    const step = `Publishing version ${job.version}: ${STAGE_WORDS[job.stage] || job.stage}`;
    if (job.stage !== "failed") {
      line.textContent = step;
      return [line];
    }
    const title = describeCode(job.code) || "The app could not be published";
    const detail = presentable(job.message) ? job.message.trim() : "";
    const previous = this.publication && this.publication.published
      ? ` The link still serves version ${this.publication.version}.` : "";
    line.textContent = `${title} (version ${job.version}).${previous}`;
    if (!detail) return [line];
    const words = document.createElement("pre");
    words.className = "publish-failure";
    words.textContent = detail;
    return [line, words];
  }

  /** Follow the chat's running publish job until it ends (its own event stream). */
  follow() {
    this.stopFollowing();
    const chatId = this.chatId;
    const source = new EventSource(publishJobEventsUrl(chatId));
    this.jobEvents = source;
    source.addEventListener("publish_job", (message) => {
      if (source !== this.jobEvents) return;
      const { job } = JSON.parse(message.data);
      this.job = job;
      if (!job.active) this.stopFollowing();
      if (job.stage === "live") this.published(chatId, job);
      else this.renderPublication();
    });
  }

  stopFollowing() {
    if (this.jobEvents) this.jobEvents.close();
    this.jobEvents = null;
  }

  /** A job went live: the link serves its version now. */
  async published(chatId, job) {
    try {
      const publication = await getPublication(chatId);
      if (chatId !== this.chatId) return;
      this.publication = publication;
      this.render();
      this.els.status.textContent = `Version ${job.version} is published.`;
    } catch (exc) {
      if (chatId === this.chatId) this.els.status.textContent = exc.message;
    }
  }

  row(version) {
    const item = document.createElement("li");
    item.className = "version";
    item.dataset.version = String(version.version);
    const title = document.createElement("div");
    title.className = "version-title";
    const what = version.note || (version.turn ? `turn ${version.turn}` : "snapshot");
    title.textContent = `Version ${version.version} · ${what}`;
    const live = this.publication && this.publication.published && this.publication.version === version.version;
    if (live) {
      const badge = document.createElement("span");
      badge.className = "version-live";
      badge.textContent = "live";
      title.append(badge);
    }
    const meta = document.createElement("div");
    meta.className = "version-meta";
    meta.textContent = `${new Date(version.created * 1000).toLocaleString()} · ${version.summary}`;
    const actions = document.createElement("div");
    actions.className = "version-actions";
    actions.append(
      this.button("Changes", `Show the changes of version ${version.version}`, () => this.showDiff(version)),
      this.button("Restore", `Restore version ${version.version}`, () => this.restore(version)),
      this.button("Publish", `Publish version ${version.version}`, () => this.publish(version)),
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

  /** Start publishing `version` on the server; its progress follows from the job's events. */
  async publish(version) {
    const { status } = this.els;
    const chatId = this.chatId;
    try {
      const job = await publishVersion(chatId, version.version);
      if (chatId !== this.chatId) return;
      this.job = job;
      status.textContent = `Publishing version ${version.version}: it goes on if you close this page.`;
      this.renderPublication();
      this.follow();
    } catch (exc) {
      if (chatId !== this.chatId) return;
      // Another tab (or host) is publishing this chat: show that job's progress too.
      if (exc.code === "publish_in_progress") await this.load();
      status.textContent = exc.message;
    }
  }

  async unpublish() {
    const { status } = this.els;
    const chatId = this.chatId;
    try {
      const data = await unpublish(chatId);
      if (chatId !== this.chatId) return;
      this.publication = data.publication;
      this.render();
      status.textContent = "Unpublished: the link now answers \"not found\".";
    } catch (exc) {
      if (chatId === this.chatId) status.textContent = exc.message;
    }
  }

  async copyLink(url) {
    try {
      await navigator.clipboard.writeText(url);
      this.els.status.textContent = "Link copied.";
    } catch {
      this.els.status.textContent = `Copy this link: ${url}`;
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
