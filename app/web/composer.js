// The message composer: one send at a time, and the server's length limit shown before sending.
//
// A click, a submit and Enter all go through `submit()`, which does nothing while a send is in
// flight (Enter used to bypass the disabled button: a double Enter sent twice and created two
// chats) or while a run is being followed. The limit comes from `GET /api/me` (`limits`); a
// counter appears as a message nears it, and Send is disabled past it, with the reason in words.

const WARN_FRACTION = 0.8; // the counter shows from this share of the limit on
const MAX_HEIGHT_PX = 200;

export class Composer {
  /**
   * @param {{form: HTMLFormElement, input: HTMLTextAreaElement, send: HTMLButtonElement, count: HTMLElement}} els
   * @param {(content: string) => Promise<boolean>} onSend  resolves true when the message was
   *   accepted (the input is then cleared), false when it was refused (the text stays to edit)
   */
  constructor(els, onSend) {
    this.els = els;
    this.onSend = onSend;
    this.limit = Infinity;
    this.sending = false;
    this.running = false;
    els.form.addEventListener("submit", (e) => {
      e.preventDefault();
      this.submit();
    });
    els.input.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        this.submit();
      }
    });
    els.input.addEventListener("input", () => this.changed());
  }

  /** The longest message the server takes (characters, as the server counts them). */
  setLimit(limit) {
    if (Number.isFinite(limit) && limit > 0) this.limit = limit;
    this.update();
  }

  /** A run is being followed: nothing is sent until it ends. */
  setRunning(running) {
    this.running = running;
    this.update();
  }

  /** Put `text` in the input (an example prompt, say) and focus it. */
  fill(text) {
    this.els.input.value = text;
    this.changed();
    this.els.input.focus();
  }

  focus() {
    this.els.input.focus();
  }

  /** Send what is typed, unless a send or a run is under way or the text is over the limit. */
  async submit() {
    const content = this.els.input.value.trim();
    if (!content || this.sending || this.running || this.over()) return;
    this.sending = true;
    this.update();
    try {
      // The text is cleared only if it is still what was sent (typing went on meanwhile).
      if ((await this.onSend(content)) && this.els.input.value.trim() === content) this.fill("");
    } finally {
      this.sending = false;
      this.update();
    }
  }

  over() {
    return this.length() > this.limit;
  }

  length() {
    // The server counts code points (Python's len), not UTF-16 units.
    return [...this.els.input.value.trim()].length;
  }

  changed() {
    const input = this.els.input;
    input.style.height = "auto";
    input.style.height = `${Math.min(input.scrollHeight, MAX_HEIGHT_PX)}px`;
    this.update();
  }

  update() {
    const { send, count, input } = this.els;
    const length = this.length();
    const over = length > this.limit;
    send.disabled = this.sending || this.running || over;
    input.setAttribute("aria-invalid", over ? "true" : "false");
    count.hidden = length < this.limit * WARN_FRACTION;
    count.classList.toggle("over", over);
    const shown = `${length.toLocaleString("en")} / ${this.limit.toLocaleString("en")} characters`;
    count.textContent = over
      ? `${shown}: ${(length - this.limit).toLocaleString("en")} too many to send`
      : shown;
  }
}
