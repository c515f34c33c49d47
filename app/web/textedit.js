// Editing an element's text in place, no model turn (issue 26).
//
// In select mode the preview's selector script lets the person retype a double-clicked element's
// text, then posts `{type: "kiln-text-edit", file, line, column, tag, old_text, new_text}` to this
// window. A message is taken only from the chat's preview frame, from the preview's own origin
// (any page could post one otherwise). It goes to `POST /api/chats/{id}/text-edits`: the server
// changes that one text node in the file, records a version ("Edited text in src/App.jsx"), and
// the preview updates by hot module replacement. What the server refuses (text built by the
// app's code, the same text twice, a file changed since, a run in progress) becomes a suggested
// message in the composer instead, with the reason in words: sending it asks the model. The
// frame is told the outcome, `{type: "kiln-text-edit-result", file, line, column, ok, version}`
// or `{…, ok: false, code, message}`, posted to the preview's origin only.

import { postTextEdit } from "./api.js";

export const TEXT_EDIT_MESSAGE = "kiln-text-edit";
export const TEXT_EDIT_RESULT = "kiln-text-edit-result";
const TEXT_EDIT_NOTE = "Edited text in ";
const MAX_TEXT = 5000; // the server's limit per text

/**
 * @typedef {{file: string, line: number, column: number, tag: string, old_text: string, new_text: string}} TextEdit
 * @typedef {{chatId: () => (string | null), frame: HTMLIFrameElement, origin: () => (string | null),
 *            applied: (answer: any, edit: TextEdit) => void,
 *            refused: (suggestion: string, reason: string, edit: TextEdit) => void}} TextEditHooks
 */

export class TextEdits {
  /** @param {TextEditHooks} hooks  where edits come from and where their outcome goes */
  constructor(hooks) {
    this.hooks = hooks;
    this.pending = Promise.resolve(); // one edit at a time, in the order they were made
    window.addEventListener("message", (event) => this.received(event));
  }

  /** A message posted to this window: a text edit from the chat's preview, or ignored. */
  received(event) {
    const edit = readEdit(event.data);
    if (!edit) return;
    const { frame, origin, chatId } = this.hooks;
    if (event.source !== frame.contentWindow || !origin() || event.origin !== origin()) return;
    const chat = chatId();
    if (!chat) return;
    this.pending = this.pending.then(() => this.apply(chat, edit));
  }

  /** Ask the server to apply `edit` to chat `chat`'s app; tell the outcome, here and to the
   * preview's selector (which puts the element's text back when it was refused). */
  async apply(chat, edit) {
    const { tag, ...body } = edit;
    const place = { file: edit.file, line: edit.line, column: edit.column };
    try {
      const answer = await postTextEdit(chat, body);
      if (chat !== this.hooks.chatId()) return;
      this.hooks.applied(answer, edit);
      this.reply({ ...place, ok: true, version: answer?.version?.version ?? null });
    } catch (exc) {
      if (chat !== this.hooks.chatId()) return;
      this.hooks.refused(suggestion(edit), exc.message, edit);
      this.reply({ ...place, ok: false, code: exc.code || "", message: exc.message });
    }
  }

  /** Post `result` to the preview frame, to its own origin only. */
  reply(result) {
    const origin = this.hooks.origin();
    const target = this.hooks.frame.contentWindow;
    if (origin && target) target.postMessage({ type: TEXT_EDIT_RESULT, ...result }, origin);
  }
}

/** The edit a message carries, or null for anything else (other messages, bad fields). */
export function readEdit(data) {
  if (!data || typeof data !== "object" || data.type !== TEXT_EDIT_MESSAGE) return null;
  const { file, line, column, tag, old_text: oldText, new_text: newText } = data;
  const texts = [file, tag, oldText, newText].every((v) => typeof v === "string" && v.length <= MAX_TEXT);
  const places = [line, column].every((v) => Number.isInteger(v) && v >= 0);
  if (!texts || !places || !file || !newText.trim()) return null;
  return { file, line, column, tag, old_text: oldText, new_text: newText };
}

/** The message that asks the model for the change the server could not make in place. */
export function suggestion(edit) {
  const tag = edit.tag ? `<${edit.tag}>` : "the element";
  const text = edit.new_text.replace(/\s+/g, " ").trim();
  return `Change the text of ${tag} in ${edit.file}:${edit.line} to "${text}"`;
}

/** The chat's notes for the text edits among `versions` (oldest first): `[{created, text}]`.
 * A text edit's version is made by no run and has the note `Edited text in <file>`
 * (app/projects/text_edit.py). */
export function editNotes(versions) {
  return versions
    .filter((version) => !version.run && version.note?.startsWith(TEXT_EDIT_NOTE))
    .map((version) => ({ created: version.created, text: appliedWords({ version }) }));
}

/** What the chat shows for an edit applied in place. */
export function appliedWords(answer) {
  const version = answer?.version;
  return version ? `${version.note} (version ${version.version}, no model used).` : "Text edited.";
}

/** What the chat shows when the server would not edit in place (`reason`: its words). */
export function refusedWords(reason) {
  const said = /[.!?]$/.test(reason) ? reason : `${reason}.`;
  return `Not edited in place: ${said} The change is in the message box: send it to ask the model.`;
}
