// The Environment tab: a chat's app variables and secrets (`/api/chats/{id}/env`). A secret is
// write-only: the server never sends its value back, so it is shown masked and can only be
// replaced or deleted. A `VITE_` or `NEXT_PUBLIC_` variable is public (Vite or Next.js builds it
// into the JavaScript every visitor downloads: app/store/app_env.py's PUBLIC_PREFIXES) and is
// badged so; a secret under such a prefix is refused here, in words,
// before the server refuses it too. Saving writes the environment into the chat's sandbox,
// whose dev server starts over with it: the panel says so.

import { deleteEnvVariable, listEnv, putEnvVariable } from "./api.js";

export const PUBLIC_PREFIXES = ["VITE_", "NEXT_PUBLIC_"];
const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const PUBLIC_WORDS = "Public: the build puts VITE_ and NEXT_PUBLIC_ variables into the app's JavaScript, which anyone who opens the app can read.";

/** The public prefix `name` starts with, or "". */
function publicPrefix(name) {
  return PUBLIC_PREFIXES.find((prefix) => name.startsWith(prefix)) || "";
}
const MASK = "••••••••";

export class EnvPanel {
  /**
   * @param {{list: HTMLElement, status: HTMLElement, form: HTMLFormElement, name: HTMLInputElement,
   *   value: HTMLInputElement, secret: HTMLInputElement, hint: HTMLElement, count: HTMLElement}} els
   */
  constructor(els) {
    this.els = els;
    this.chatId = null;
    this.variables = [];
    els.form.addEventListener("submit", (e) => this.save(e));
    els.secret.addEventListener("change", () => this.describe());
    els.name.addEventListener("input", () => this.describe());
  }

  reset(chatId = null) {
    this.chatId = chatId;
    this.variables = [];
    this.els.list.replaceChildren();
    this.els.count.textContent = "";
    this.els.form.hidden = !chatId;
    this.els.status.textContent = chatId ? "" : "Start a chat to give its app variables and secrets.";
    this.els.form.reset();
    this.describe();
  }

  /** Fetch and show the chat's variables. */
  async load() {
    const chatId = this.chatId;
    if (!chatId) return;
    try {
      const listed = await listEnv(chatId);
      if (chatId !== this.chatId) return;
      this.variables = listed.variables;
      this.render();
    } catch (exc) {
      if (chatId === this.chatId) this.els.status.textContent = exc.message;
    }
  }

  render() {
    const { list, count } = this.els;
    count.textContent = this.variables.length ? String(this.variables.length) : "";
    if (!this.variables.length) {
      const empty = document.createElement("li");
      empty.className = "hint";
      empty.textContent = "No variables yet. The app reads them as process.env.NAME (server code, commands) or import.meta.env.VITE_NAME (browser code); they are never written into its files.";
      list.replaceChildren(empty);
      return;
    }
    list.replaceChildren(...this.variables.map((v) => this.row(v)));
  }

  row(variable) {
    const item = document.createElement("li");
    item.className = "env-row";
    item.dataset.name = variable.name;
    const name = document.createElement("code");
    name.className = "env-name";
    name.textContent = variable.name;
    const value = document.createElement("span");
    value.className = "env-value";
    value.textContent = variable.secret ? MASK : variable.value;
    const badges = document.createElement("span");
    if (variable.secret) badges.append(badge("secret", "Secret: never shown again; kiln hides it in command output."));
    if (variable.public) badges.append(badge("public", PUBLIC_WORDS));
    const edit = button("Edit", () => this.edit(variable));
    const remove = button("Delete", () => this.remove(variable));
    remove.classList.add("danger");
    edit.setAttribute("aria-label", `Edit ${variable.name}`);
    remove.setAttribute("aria-label", `Delete ${variable.name}`);
    item.append(name, badges, value, edit, remove);
    return item;
  }

  /** Fill the form with `variable` (a secret's value must be typed again: it is never sent). */
  edit(variable) {
    const { name, value, secret } = this.els;
    name.value = variable.name;
    secret.checked = variable.secret;
    value.value = variable.secret ? "" : variable.value;
    value.placeholder = variable.secret ? "Type the new value (the old one is never shown)" : "";
    this.describe();
    value.focus();
  }

  /** The words under the form: what the name and kind chosen mean. */
  describe() {
    const { name, secret, value, hint } = this.els;
    value.type = secret.checked ? "password" : "text";
    const publicName = publicPrefix(name.value);
    if (publicName && secret.checked) {
      hint.textContent = `A secret cannot start with ${publicName}: the build would put it into the app's public JavaScript. Pick a name without ${publicName}, and read it in server code or commands.`;
    } else if (publicName) {
      hint.textContent = PUBLIC_WORDS;
    } else {
      hint.textContent = secret.checked
        ? "Secret: stored encrypted, never shown again, given to the app as process.env only."
        : "Variable: stored encrypted, shown here, given to the app as process.env.";
    }
  }

  /** Check what the form holds; the words of the first problem, or "". */
  problem() {
    const { name, secret } = this.els;
    if (!NAME.test(name.value)) return "A name is letters, digits and _, not starting with a digit.";
    if (secret.checked && publicPrefix(name.value)) {
      return `A secret cannot start with ${publicPrefix(name.value)}: the build would make it public.`;
    }
    return "";
  }

  async save(event) {
    event.preventDefault();
    const { name, value, secret, status } = this.els;
    const chatId = this.chatId;
    const wrong = this.problem();
    if (wrong) {
      status.textContent = wrong;
      return;
    }
    status.textContent = "Saving…";
    try {
      const saved = await putEnvVariable(chatId, name.value, value.value, secret.checked);
      if (chatId !== this.chatId) return;
      status.textContent = `${saved.variable.name} saved. ${restartWords(saved.dev_server)}`;
      this.els.form.reset();
      value.placeholder = "";
      this.describe();
      await this.load();
    } catch (exc) {
      if (chatId === this.chatId) status.textContent = exc.message;
    }
  }

  async remove(variable) {
    const chatId = this.chatId;
    this.els.status.textContent = `Deleting ${variable.name}…`;
    try {
      const removed = await deleteEnvVariable(chatId, variable.name);
      if (chatId !== this.chatId) return;
      this.els.status.textContent = `${variable.name} deleted. ${restartWords(removed.dev_server)}`;
      await this.load();
    } catch (exc) {
      if (chatId === this.chatId) this.els.status.textContent = exc.message;
    }
  }
}

function restartWords(devServer) {
  return devServer === "restarting"
    ? "The preview restarts with the new environment (a few seconds)."
    : "The app gets it when its sandbox next starts.";
}

function badge(text, title) {
  const span = document.createElement("span");
  span.className = `badge env-${text}`;
  span.textContent = text;
  span.title = title;
  return span;
}

function button(text, onClick) {
  const made = document.createElement("button");
  made.type = "button";
  made.textContent = text;
  made.addEventListener("click", onClick);
  return made;
}
