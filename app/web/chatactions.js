// Renaming and deleting chats from the sidebar. A delete is confirmed in a dialog that says what
// goes with the chat (its app's sandbox, files, versions and history); a chat with a run in
// progress is refused by the server (409 chat_busy, in words), and the dialog shows why.

import * as api from "./api.js";

export class ChatActions {
  /**
   * @param {{dialog: HTMLDialogElement, text: HTMLElement, confirm: HTMLButtonElement, cancel: HTMLButtonElement, status: HTMLElement}} els
   * @param {{renamed: (chat) => void, deleted: (chatId: string) => void, failed: (exc: Error) => void}} on
   */
  constructor(els, on) {
    this.els = els;
    this.on = on;
    this.pending = null; // the chat the dialog asks about
    els.cancel.addEventListener("click", () => els.dialog.close());
    els.confirm.addEventListener("click", () => this.confirmDelete());
    els.dialog.addEventListener("close", () => (this.pending = null));
  }

  /** Save a chat's new title (the sidebar's inline edit). */
  async rename(chat, title) {
    try {
      this.on.renamed(await api.renameChat(chat.id, title));
    } catch (exc) {
      this.on.failed(exc);
    }
  }

  /** Ask whether to delete `chat`. */
  remove(chat) {
    this.pending = chat;
    const title = chat.title || "Untitled chat";
    this.els.text.textContent = `Delete “${title}”? Its app, files, versions and messages are removed for good.`;
    this.els.status.textContent = "";
    this.els.confirm.disabled = false;
    this.els.dialog.showModal();
    this.els.cancel.focus();
  }

  async confirmDelete() {
    const chat = this.pending;
    if (!chat) return;
    this.els.confirm.disabled = true;
    this.els.status.textContent = "Deleting…";
    try {
      await api.deleteChat(chat.id);
    } catch (exc) {
      if (exc.status === 404) this.finish(chat); // gone already: as good as deleted
      else this.refused(exc);
      return;
    }
    this.finish(chat);
  }

  finish(chat) {
    this.els.dialog.close();
    this.on.deleted(chat.id);
  }

  refused(exc) {
    if (exc.status === 401) {
      this.els.dialog.close();
      this.on.failed(exc);
      return;
    }
    this.els.status.textContent = exc.message;
    this.els.confirm.disabled = exc.status === 409; // in progress: cancel the run first
  }
}
