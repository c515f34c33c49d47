// Images in the composer (issue 26): paste, drop or pick PNG, JPEG, WebP or GIF images, shown as
// thumbnails with a remove button, sent with the message as `images: [{media_type, data}]`.
//
// The checks mirror the server's (app/chat_images.py), so most refusals are said here, in
// words, before anything is sent: at most 4 images, 5 MB each, the kind read from the file's
// first bytes (its magic number), never from its name or the browser's guess. The server
// decides: what passes here is checked again there.

import { h } from "./dom.js";

export const MAX_IMAGES = 4;
export const MAX_IMAGE_BYTES = 5 * 1024 * 1024;
const MB = 1024 * 1024;

// [offset, magic bytes, media type]: the formats' signatures, as on the server.
/** @type {[number, number[], string][]} */
const SIGNATURES = [
  [0, [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], "image/png"],
  [0, [0xff, 0xd8, 0xff], "image/jpeg"],
  [0, [...new TextEncoder().encode("GIF87a")], "image/gif"],
  [0, [...new TextEncoder().encode("GIF89a")], "image/gif"],
  [8, [...new TextEncoder().encode("WEBP")], "image/webp"],
];
const RIFF = [...new TextEncoder().encode("RIFF")];

const startsWith = (bytes, offset, magic) => magic.every((byte, i) => bytes[offset + i] === byte);

/** The media type `bytes` (a Uint8Array) are, by their magic number; null for anything else. */
export function sniffImage(bytes) {
  for (const [offset, magic, type] of SIGNATURES) {
    if (!startsWith(bytes, offset, magic)) continue;
    if (type === "image/webp" && !startsWith(bytes, 0, RIFF)) continue;
    return type;
  }
  return null;
}

function base64Of(bytes) {
  let binary = "";
  const step = 0x8000; // String.fromCharCode takes a bounded number of arguments
  for (let i = 0; i < bytes.length; i += step) binary += String.fromCharCode(...bytes.subarray(i, i + step));
  return btoa(binary);
}

/** The thumbnails of a message's images (`src` URLs), or null when it has none. */
export function messageImages(sources) {
  if (!sources.length) return null;
  return h("div", { class: "msg-images" }, sources.map((src, i) => h("img", { class: "msg-image", src, alt: `Attached image ${i + 1}` })));
}

/** The URLs a stored message's images are served at (only to their owner). */
export const storedImageUrls = (chatId, images = []) =>
  images.map((image) => `/api/chats/${encodeURIComponent(chatId)}/images/${encodeURIComponent(image.id)}`);

export class ComposerImages {
  /**
   * @param {{form: HTMLElement, input: HTMLElement, tray: HTMLElement, pick: HTMLButtonElement, file: HTMLInputElement, error: HTMLElement}} els
   */
  constructor(els) {
    this.els = els;
    /** @type {{media_type: string, data: string, name: string}[]} */
    this.images = [];
    els.input.addEventListener("paste", (e) => {
      const files = [...(e.clipboardData?.files || [])];
      if (!files.length) return; // text is pasted as usual
      e.preventDefault();
      this.add(files);
    });
    els.form.addEventListener("dragover", (e) => {
      if (e.dataTransfer?.types.includes("Files")) e.preventDefault();
    });
    els.form.addEventListener("drop", (e) => {
      const files = [...(e.dataTransfer?.files || [])];
      if (!files.length) return;
      e.preventDefault();
      this.add(files);
    });
    els.pick.addEventListener("click", () => els.file.click());
    els.file.addEventListener("change", () => {
      this.add([...(els.file.files || [])]);
      els.file.value = ""; // the same file can be picked again after removing it
    });
    this.render();
  }

  /** Check and attach `files`; each refusal is said in words (the others still attach). */
  async add(files) {
    const refusals = [];
    for (const file of files) {
      const refusal = await this.attach(file);
      if (refusal) refusals.push(refusal);
    }
    this.render(refusals.join(" "));
  }

  /** Attach one file; the refusal's words, or "" when it was attached. */
  async attach(file) {
    const name = file.name || "the pasted image";
    if (this.images.length >= MAX_IMAGES) return `${name}: at most ${MAX_IMAGES} images can go with one message.`;
    if (file.size > MAX_IMAGE_BYTES) {
      return `${name} is ${(file.size / MB).toFixed(1)} MB; an image may be at most ${MAX_IMAGE_BYTES / MB} MB.`;
    }
    const bytes = new Uint8Array(await file.arrayBuffer());
    const type = sniffImage(bytes);
    if (!type) return `${name} is not a PNG, JPEG, WebP or GIF image.`;
    this.images.push({ media_type: type, data: base64Of(bytes), name });
    return "";
  }

  /** What the message sends: `[{media_type, data}]` (base64). */
  payload() {
    return this.images.map(({ media_type, data }) => ({ media_type, data }));
  }

  /** `data:` URLs of the attached images (the sent message shows them until a reload). */
  sources() {
    return this.images.map((image) => `data:${image.media_type};base64,${image.data}`);
  }

  /** Forget the attached images (the message was sent). */
  clear() {
    this.images = [];
    this.render();
  }

  render(refusal = "") {
    const { tray, pick, error } = this.els;
    const sources = this.sources();
    tray.replaceChildren(...this.images.map((image, index) => h("figure", { class: "thumb" },
      h("img", { src: sources[index], alt: `Image ${index + 1}: ${image.name}` }),
      h("button", { type: "button", class: "thumb-remove", "aria-label": `Remove image ${index + 1}`, onclick: () => this.remove(index) }, "×"))));
    tray.hidden = !this.images.length;
    pick.disabled = this.images.length >= MAX_IMAGES;
    error.textContent = refusal;
    error.hidden = !refusal;
  }

  remove(index) {
    this.images.splice(index, 1);
    this.render();
    this.els.input.focus();
  }
}
