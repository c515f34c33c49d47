// The log panel: install and command output, one line per `output` event, with a header line
// when an install or a command starts and its exit code when it ends. Kept to the last
// MAX_LINES lines so a chatty build cannot slow the page down.

const MAX_LINES = 3000;

export class LogPanel {
  /** @param {{view: HTMLElement, badge: HTMLElement}} els */
  constructor(els) {
    this.els = els;
    this.reset();
  }

  /** Forget everything (another chat). */
  reset() {
    this.els.view.replaceChildren();
    this.lines = 0;
    this.unseen = 0;
    this.els.badge.textContent = "";
    this.placeholder();
  }

  placeholder() {
    const empty = document.createElement("div");
    empty.className = "log-empty";
    empty.textContent = "Install and command output will appear here.";
    this.els.view.append(empty);
  }

  /** The user looked at the log: clear the unseen-lines badge. */
  seen() {
    this.unseen = 0;
    this.els.badge.textContent = "";
  }

  /** Apply one run event; returns true if it added to the log. */
  apply(event) {
    switch (event.type) {
      case "install_started":
        return this.add(`$ npm install ${(event.packages || []).join(" ")}`, "log-head");
      case "install_finished":
        return this.add(exitLine(event.exit_code), event.exit_code === 0 ? "log-ok" : "log-bad");
      case "command_started":
        return this.add(`$ ${(event.argv || []).join(" ")}`, "log-head");
      case "command_finished":
        return this.add(exitLine(event.exit_code), event.exit_code === 0 ? "log-ok" : "log-bad");
      case "output":
        return this.add(event.line ?? "", "");
      case "postgen":
        if (!event.build) return false;
        return this.add(`build ${event.build.ok ? "passed" : "failed"}`, event.build.ok ? "log-ok" : "log-bad");
      default:
        return false;
    }
  }

  add(text, cls) {
    const view = this.els.view;
    view.querySelector(".log-empty")?.remove();
    const atEnd = view.scrollTop + view.clientHeight >= view.scrollHeight - 40;
    const line = document.createElement("div");
    line.className = `log-line ${cls}`.trim();
    line.textContent = text;
    view.append(line);
    this.lines += 1;
    if (this.lines > MAX_LINES) {
      view.firstElementChild.remove();
      this.lines -= 1;
    }
    this.unseen += 1;
    this.els.badge.textContent = this.unseen > 99 ? "99+" : String(this.unseen);
    if (atEnd) view.scrollTop = view.scrollHeight;
    return true;
  }
}

function exitLine(code) {
  return code === 0 ? "exit 0 (ok)" : `exit ${code ?? "?"}`;
}
