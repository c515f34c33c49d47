// Git out and in: the Versions tab's "Push to git" form (a chat's remote, its token stored
// encrypted and never shown again, the last push's result) and the sidebar's "Import from git"
// form (a new chat whose first version is a repository's files, its preview started).

import { getRemote, importChat, pushProject, setRemote } from "./api.js";

/** Words for a push's result as the server keeps it (`last_push`). */
export function pushWords(remote) {
  const last = remote?.last_push;
  if (!last) return remote ? `Pushes go to ${remote.url} (${remote.branch}).` : "No remote yet.";
  const when = last.at ? ` at ${new Date(last.at * 1000).toLocaleString()}` : "";
  if (!last.ok) return `Last push failed: ${last.message}`;
  const what = last.outcome === "up_to_date" ? "was already there" : "pushed";
  return `Version ${last.version} ${what}${when}: ${remote.url} (${remote.branch}).`;
}

export class GitRemoteForm {
  /** @param {{form: HTMLFormElement, url: HTMLInputElement, branch: HTMLInputElement, token: HTMLInputElement, push: HTMLButtonElement, status: HTMLElement}} els */
  constructor(els) {
    this.els = els;
    this.chatId = null;
    els.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.save();
    });
    els.push.addEventListener("click", () => this.push());
  }

  reset(chatId = null) {
    this.chatId = chatId;
    const { url, branch, token, status } = this.els;
    url.value = branch.value = token.value = "";
    token.placeholder = "optional; stored encrypted";
    status.textContent = chatId ? "" : "No chat open.";
  }

  async load() {
    const chatId = this.chatId;
    if (!chatId) return;
    try {
      const remote = await getRemote(chatId);
      if (chatId === this.chatId) this.show(remote);
    } catch (exc) {
      if (chatId === this.chatId) this.els.status.textContent = exc.message;
    }
  }

  show(remote) {
    const { url, branch, token, status } = this.els;
    url.value = remote?.url || "";
    branch.value = remote?.branch || "";
    // The token field is left alone: a token typed while a read was under way must survive it
    // (only a save that stored it empties the field).
    token.placeholder = remote?.has_token ? "a token is stored (type to replace)" : "optional; stored encrypted";
    status.textContent = pushWords(remote);
  }

  async save() {
    const { url, branch, token, status } = this.els;
    const given = token.value.trim();
    const remote = await this.guard(() => setRemote(this.chatId, url.value.trim(), branch.value.trim() || "main", given || undefined));
    if (remote) {
      if (given && token.value.trim() === given) token.value = "";
      this.show(remote);
      status.textContent = `Saved. ${pushWords(remote)}`;
    }
    return remote;
  }

  async push() {
    if (this.els.url.value.trim() && !(await this.save())) return;
    this.els.status.textContent = "Pushing…";
    const done = await this.guard(() => pushProject(this.chatId));
    if (done) this.show(done.remote);
    else this.load(); // the refusal is kept as the last push: show it in the server's words
  }

  async guard(call) {
    this.els.push.disabled = true;
    try {
      return await call();
    } catch (exc) {
      this.els.status.textContent = exc.message;
      return null;
    } finally {
      this.els.push.disabled = false;
    }
  }
}

export class ImportForm {
  /**
   * @param {{form: HTMLFormElement, url: HTMLInputElement, branch: HTMLInputElement, token: HTMLInputElement, submit: HTMLButtonElement, status: HTMLElement}} els
   * @param {(chat: object) => void} onImported  called with the new chat
   */
  constructor(els, onImported) {
    this.els = els;
    els.form.addEventListener("submit", async (event) => {
      event.preventDefault();
      await this.submit(onImported);
    });
  }

  async submit(onImported) {
    const { url, branch, token, submit, status } = this.els;
    const body = { url: url.value.trim() };
    if (branch.value.trim()) body.branch = branch.value.trim();
    if (token.value.trim()) body.token = token.value.trim();
    submit.disabled = true;
    status.textContent = "Importing: cloning, then starting the preview…";
    try {
      const made = await importChat(body);
      const left = made.left_out.length ? ` ${made.left_out.length} file(s) left out.` : "";
      status.textContent = `Imported as a ${made.template} app.${left}`;
      url.value = branch.value = token.value = "";
      onImported(made.chat);
    } catch (exc) {
      status.textContent = exc.message;
    } finally {
      submit.disabled = false;
    }
  }
}
