// Provider settings: which provider and model to use, and API keys (sent once to
// `PUT /api/me/keys/{provider}`, stored encrypted, never shown again; Delete key forgets it). With no key for the
// chosen provider kiln uses the demo replay provider, and the page says so. Every message is sent
// with the choice made here (`POST /api/chats/{id}/messages {content, provider, model}`), so a
// chat may change model from one message to the next. An OpenAI-compatible server (Ollama,
// vLLM, LM Studio, OpenRouter) is usable once the operator set its base URL: `GET /api/me` then
// lists it in `available`; it takes any model name the server knows, and a key is optional.
// Sign out (`POST /api/logout`) and Sign out everywhere (`POST /api/me/sessions/revoke`) end the
// session(s); the page then starts over at its sign-in form.

import { deleteKey, logout, me, putKey, revokeSessions } from "./api.js";

const STORAGE_KEY = "kiln.choice";
export const PROVIDERS = {
  replay: { label: "Demo (recorded answers, no key needed)" },
  anthropic: { label: "Anthropic", model: "claude-sonnet-4-6" },
  openai: { label: "OpenAI", model: "gpt-5.5" },
  google: { label: "Google", model: "gemini-2.5-flash" },
  // No model of its own: an empty name means the server's default (KILN_OPENAI_COMPATIBLE_MODEL).
  "openai-compatible": { label: "OpenAI-compatible server", model: "", keyOptional: true },
};

export class Settings {
  /**
   * @param {{dialog: HTMLDialogElement, form: HTMLFormElement, provider: HTMLSelectElement,
   *   modelSelect: HTMLSelectElement, modelInput: HTMLInputElement, modelLabel: HTMLLabelElement,
   *   keyRow: HTMLElement, keyInput: HTMLInputElement, keyNote: HTMLElement,
   *   saveKey: HTMLButtonElement, deleteKey: HTMLButtonElement, status: HTMLElement,
   *   close: HTMLButtonElement, signOut: HTMLButtonElement, signOutEverywhere: HTMLButtonElement}} els
   * @param {() => void} onChange
   */
  constructor(els, onChange) {
    this.els = els;
    this.onChange = onChange;
    this.me = { providers: [], available: [], demos: [], default: {} };
    this.choice = readChoice();
    els.provider.addEventListener("change", () => this.fillModel(els.provider.value, ""));
    els.form.addEventListener("submit", (e) => this.save(e));
    els.saveKey.addEventListener("click", () => this.saveKey());
    els.deleteKey.addEventListener("click", () => this.deleteKey());
    els.close.addEventListener("click", () => els.dialog.close());
    els.signOut.addEventListener("click", () => this.signOut(logout, "Signing out…"));
    els.signOutEverywhere.addEventListener("click", () => this.signOut(revokeSessions, "Signing out everywhere…"));
  }

  /** End the session(s) with `end`, then start the page over (it asks for a sign-in link). */
  async signOut(end, saying) {
    this.els.status.textContent = saying;
    try {
      await end();
    } catch (exc) {
      this.els.status.textContent = exc.message;
      return;
    }
    window.location.assign("/");
  }

  /** Take `GET /api/me` into account (keys stored, demos, default). */
  setMe(me) {
    this.me = {
      providers: me.providers || [], available: me.available || [], demos: me.demos || [], default: me.default || {},
    };
    if (!this.choice) this.choice = { ...this.me.default };
  }

  /** What to send with a message: `{provider, model, demo, reason, wanted}` (`wanted`: the
   * provider chosen but lacking a key, replaced by the demo). */
  effective() {
    const want = this.choice || this.me.default || {};
    const demos = this.me.demos;
    if (want.provider && want.provider !== "replay" && this.usable(want.provider)) {
      // An empty model is left out of the message: the server picks the provider's default.
      return { provider: want.provider, model: want.model || PROVIDERS[want.provider]?.model || undefined, demo: false };
    }
    const model = want.provider === "replay" && demos.includes(want.model) ? want.model : demos[0] || "todo-app";
    const wanted = want.provider && want.provider !== "replay" ? want.provider : null;
    const reason = wanted || !this.me.providers.length ? "no-key" : "chosen";
    return { provider: "replay", model, demo: true, reason, wanted };
  }

  /** Whether a message may name `provider`: a key is stored, or the server is set up for it. */
  usable(provider) {
    if (PROVIDERS[provider]?.keyOptional) return this.me.available.includes(provider); // needs its base URL
    return this.me.providers.includes(provider) || this.me.available.includes(provider);
  }

  /** Open the dialog. */
  open() {
    const choice = this.choice || {};
    const { provider } = this.els;
    this.renderProviders(choice.provider in PROVIDERS ? choice.provider : "replay");
    this.fillModel(provider.value, choice.model || "");
    this.els.status.textContent = "";
    this.els.dialog.showModal();
    provider.focus();
  }

  renderProviders(selected) {
    const options = Object.entries(PROVIDERS).map(([name, info]) => new Option(keyLabel(name, info, this.me), name));
    this.els.provider.replaceChildren(...options);
    this.els.provider.value = selected;
  }

  fillModel(providerName, model) {
    const { modelSelect, modelInput, keyRow, keyNote } = this.els;
    const demo = providerName === "replay";
    modelSelect.hidden = !demo;
    modelInput.hidden = demo;
    modelSelect.disabled = !demo;
    modelInput.disabled = demo;
    keyRow.hidden = demo;
    this.els.modelLabel.htmlFor = demo ? modelSelect.id : modelInput.id;
    if (demo) {
      modelSelect.replaceChildren(...this.me.demos.map((name) => new Option(name, name)));
      if (this.me.demos.includes(model)) modelSelect.value = model;
    } else {
      const info = PROVIDERS[providerName];
      modelInput.value = model || info.model;
      modelInput.placeholder = info.keyOptional ? "the server's default model, e.g. llama3.1:8b" : "";
      keyNote.textContent = keyHint(providerName, info, this.me);
    }
    this.els.deleteKey.hidden = demo || !this.me.providers.includes(providerName);
    this.els.keyInput.value = "";
  }

  async saveKey() {
    const provider = this.els.provider.value;
    const key = this.els.keyInput.value.trim();
    if (!key) {
      this.els.status.textContent = "Paste an API key first.";
      this.els.keyInput.focus();
      return;
    }
    this.els.status.textContent = "Saving the key…";
    try {
      await putKey(provider, key);
    } catch (exc) {
      this.els.status.textContent = exc.message;
      return;
    }
    this.els.keyInput.value = "";
    if (!this.me.providers.includes(provider)) this.me.providers.push(provider);
    if (!PROVIDERS[provider]?.keyOptional && !this.me.available.includes(provider)) this.me.available.push(provider);
    this.renderProviders(provider);
    this.fillModel(provider, this.els.modelInput.value);
    this.els.status.textContent = "Key saved (stored encrypted; it will not be shown again).";
    this.onChange();
  }

  async deleteKey() {
    const provider = this.els.provider.value;
    this.els.status.textContent = "Deleting the key…";
    try {
      await deleteKey(provider);
      // What is usable now depends on the server's own keys too: ask it again.
      this.setMe(await me());
    } catch (exc) {
      this.els.status.textContent = exc.message;
      return;
    }
    this.renderProviders(provider);
    this.fillModel(provider, this.els.modelInput.value);
    this.els.status.textContent = "Key deleted.";
    this.onChange();
  }

  save(event) {
    event.preventDefault();
    const provider = this.els.provider.value;
    const model = provider === "replay" ? this.els.modelSelect.value : this.els.modelInput.value.trim();
    this.choice = { provider, model };
    localStorage.setItem(STORAGE_KEY, JSON.stringify(this.choice));
    this.els.dialog.close();
    this.onChange();
  }
}

function keyLabel(name, info, me) {
  if (name === "replay") return info.label;
  if (me.providers.includes(name)) return `${info.label} (key stored)`;
  if (info.keyOptional && !me.available.includes(name)) return `${info.label} (not set up)`;
  return info.label;
}

/** What the key row says for `name`: stored, optional, or needed. */
function keyHint(name, info, me) {
  const stored = me.providers.includes(name);
  if (info.keyOptional && !me.available.includes(name)) {
    return "The server has no OpenAI-compatible base URL (KILN_OPENAI_COMPATIBLE_BASE_URL): kiln uses the demo replay instead.";
  }
  if (info.keyOptional) {
    return stored
      ? "A key is stored for this server. Paste a new one to replace it."
      : "Optional: local servers (Ollama, vLLM, LM Studio) need no key; OpenRouter and gateways do.";
  }
  return stored
    ? "A key is stored for this provider. Paste a new one to replace it."
    : "No key stored yet: without one, kiln uses the demo replay instead.";
}

function readChoice() {
  try {
    const saved = JSON.parse(localStorage.getItem(STORAGE_KEY));
    return saved && typeof saved.provider === "string" ? saved : null;
  } catch {
    return null;
  }
}
