// The file tree and the read-only code view. Files appear the moment the model starts them
// (`file_start`), grow with `file_content`, and are complete at `file_end`; the file being
// written is highlighted and, unless the user picked another file, shown as it grows.
// Workspace files that no event named (the template's) come from the sandbox listing and are
// fetched when opened.

import { readFile } from "./api.js";
import { highlight, languageOf } from "./highlight.js";

export class FilesPanel {
  /** @param {{tree: HTMLElement, path: HTMLElement, code: HTMLElement, count: HTMLElement}} els */
  constructor(els) {
    this.els = els;
    this.sandboxId = null;
    this.reset();
    els.tree.addEventListener("click", (e) => {
      const target = /** @type {Element} */ (e.target);
      const button = /** @type {HTMLButtonElement | null} */ (target.closest("button[data-path]"));
      if (button) this.select(button.dataset.path, { byUser: true });
    });
  }

  /** Forget everything (another chat). */
  reset() {
    this.files = new Map(); // path -> {content: string | null, writing: boolean, fresh: boolean}
    this.writing = null;
    this.selected = null;
    this.follow = true;
    this.pending = false;
    this.els.tree.replaceChildren();
    this.els.path.textContent = "No file selected";
    this.els.code.replaceChildren();
    this.updateCount();
  }

  /** A new run starts: follow the file being written again. */
  startRun() {
    this.follow = true;
    for (const file of this.files.values()) file.fresh = false;
    this.els.tree.querySelectorAll(".fresh").forEach((el) => el.classList.remove("fresh"));
  }

  /** Apply one run event; returns the path it touched, if any. */
  apply(event) {
    if (event.type === "file_start") {
      this.upsert(event.path, { content: "", writing: true, fresh: true });
      this.writing = event.path;
      if (this.follow) this.select(event.path);
    } else if (event.type === "file_content") {
      const file = this.files.get(event.path) || this.upsert(event.path, { content: "", writing: true });
      file.content = (file.content || "") + event.content;
      if (event.path === this.selected) this.scheduleRender();
    } else if (event.type === "file_end") {
      const file = this.files.get(event.path);
      if (file) file.writing = false;
      if (this.writing === event.path) this.writing = null;
      this.markItem(event.path);
    } else {
      return null;
    }
    return event.path;
  }

  /** Merge the sandbox's workspace listing (files no event of this page named). */
  async loadWorkspace(listing, sandboxId) {
    this.sandboxId = sandboxId;
    for (const { path } of listing) {
      if (!this.files.has(path)) this.upsert(path, { content: null, writing: false });
    }
  }

  /** Every path in the tree, sorted. */
  paths() {
    return [...this.files.keys()].sort();
  }

  upsert(path, fields) {
    const known = this.files.get(path);
    const file = Object.assign(known || { content: null, writing: false, fresh: false }, fields);
    this.files.set(path, file);
    if (!known) this.renderTree();
    else this.markItem(path);
    return file;
  }

  /** Show `path` in the code view (fetching it from the workspace if needed). */
  async select(path, { byUser = false } = {}) {
    if (byUser) this.follow = path === this.writing;
    this.selected = path;
    this.els.tree.querySelectorAll("button[aria-current]").forEach((b) => b.removeAttribute("aria-current"));
    const button = this.buttonFor(path);
    if (button) button.setAttribute("aria-current", "true");
    this.els.path.textContent = path;
    const file = this.files.get(path);
    if (file && file.content === null && this.sandboxId) {
      this.els.code.textContent = "Loading…";
      try {
        file.content = await readFile(this.sandboxId, path);
      } catch (exc) {
        if (this.selected === path) this.els.code.textContent = exc.message;
        return;
      }
    }
    if (this.selected === path) this.render(true);
  }

  scheduleRender() {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      this.render(false);
    });
  }

  render(jump) {
    const file = this.files.get(this.selected);
    if (!file) return;
    const pre = this.els.code.parentElement;
    const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 40;
    this.els.code.innerHTML = highlight(file.content || "", languageOf(this.selected));
    if (file.writing && (atEnd || jump)) pre.scrollTop = pre.scrollHeight;
    else if (jump) pre.scrollTop = 0;
  }

  /** @param {string} path  @returns {HTMLButtonElement | null} */
  buttonFor(path) {
    return this.els.tree.querySelector(`button[data-path="${CSS.escape(path)}"]`);
  }

  markItem(path) {
    const button = this.buttonFor(path);
    const file = this.files.get(path);
    if (!button || !file) return;
    button.classList.toggle("writing", file.writing);
    button.classList.toggle("fresh", file.fresh);
    button.title = file.writing ? `${path} (being written)` : file.fresh ? `${path} (written by the last answer)` : path;
  }

  updateCount() {
    this.els.count.textContent = this.files.size ? String(this.files.size) : "";
  }

  renderTree() {
    const root = buildTree(this.paths());
    this.els.tree.replaceChildren(...renderNodes(root, 0));
    for (const path of this.files.keys()) this.markItem(path);
    if (this.selected) this.buttonFor(this.selected)?.setAttribute("aria-current", "true");
    this.updateCount();
  }
}

/** Nested `{dirs: Map, files: []}` of sorted paths. */
function buildTree(paths) {
  const root = { dirs: new Map(), files: [] };
  for (const path of paths) {
    const parts = path.split("/");
    let node = root;
    for (const dir of parts.slice(0, -1)) {
      if (!node.dirs.has(dir)) node.dirs.set(dir, { dirs: new Map(), files: [] });
      node = node.dirs.get(dir);
    }
    node.files.push({ name: parts.at(-1), path });
  }
  return root;
}

function renderNodes(node, depth) {
  const items = [];
  for (const [name, child] of [...node.dirs].sort(([a], [b]) => a.localeCompare(b))) {
    const li = document.createElement("li");
    const details = document.createElement("details");
    details.open = true;
    const summary = document.createElement("summary");
    summary.textContent = name;
    summary.style.paddingLeft = `${depth * 12 + 4}px`;
    const list = document.createElement("ul");
    list.append(...renderNodes(child, depth + 1));
    details.append(summary, list);
    li.append(details);
    items.push(li);
  }
  for (const file of node.files) {
    const li = document.createElement("li");
    const button = document.createElement("button");
    button.type = "button";
    button.className = "file";
    button.dataset.path = file.path;
    button.textContent = file.name;
    button.style.paddingLeft = `${depth * 12 + 16}px`;
    li.append(button);
    items.push(li);
  }
  return items;
}
