// The live preview: an iframe on kiln's preview proxy (`http://<sandbox>.preview.<host>:<port>/`).
//
// The UI's session cookie is never sent to a preview host, so every load goes through a
// one-time sign-in link (`POST /api/sandboxes/{id}/preview-login`) that sets the preview host's
// own cookie and redirects to `/`. Once loaded, the frame keeps its page: Vite's HMR updates it
// as files land, so it is only reloaded on request. While a frame loads it shows a "starting"
// state (the proxy itself serves a self-refreshing page until the dev server answers).

const WORDS = {
  empty: "The preview appears here once kiln has started your app.",
  waiting: "Waiting for the app's sandbox…",
  starting: "Starting the preview…",
  failed: "The preview could not be opened.",
};
const LABELS = { live: "Live", starting: "Starting", waiting: "Waiting", empty: "", failed: "Unavailable" };

export class PreviewPanel {
  /**
   * @param {{frame: HTMLIFrameElement, overlay: HTMLElement, state: HTMLElement,
   *          address: HTMLElement, reload: HTMLButtonElement, open: HTMLAnchorElement}} els
   * @param {(sandboxId: string) => Promise<string>} signIn  a one-time sign-in URL
   */
  constructor(els, signIn) {
    this.els = els;
    this.signIn = signIn;
    this.url = null;
    this.loads = 0;
    this.onLoad = (event) => {
      if (this.url && event.target === this.els.frame && event.target.src) this.show("live");
    };
    els.frame.addEventListener("load", this.onLoad);
    els.reload.addEventListener("click", () => this.reload());
    els.open.addEventListener("click", (event) => this.openTab(event));
    this.reset();
  }

  /** No preview (another chat). */
  reset() {
    this.url = null;
    this.sandboxId = null;
    this.loads += 1;
    this.els.frame.removeAttribute("src");
    this.els.frame.hidden = true;
    this.els.address.textContent = "";
    this.els.open.removeAttribute("href");
    this.els.open.setAttribute("aria-disabled", "true");
    this.els.reload.disabled = true;
    this.show("empty");
  }

  /** A run is active but has no sandbox yet. */
  waiting() {
    if (!this.url) this.show("waiting");
  }

  /** The run is over: without a preview, say so instead of waiting. */
  idle() {
    if (!this.url) this.show("empty");
  }

  /** Point the preview at `url` of sandbox `sandboxId` (ignored when it is already there). */
  setUrl(url, sandboxId) {
    if (!url || url === this.url) return false;
    this.url = url;
    this.sandboxId = sandboxId;
    this.els.address.textContent = url;
    this.els.open.href = url;
    this.els.open.removeAttribute("aria-disabled");
    this.els.reload.disabled = false;
    this.load();
    return true;
  }

  /** Load the frame again. */
  reload() {
    if (this.url) this.load();
  }

  async load() {
    const load = ++this.loads;
    this.show("starting");
    let src = this.url;
    try {
      if (this.sandboxId) src = await this.signIn(this.sandboxId);
    } catch {
      // Fall back to the plain URL: a cookie from an earlier sign-in may still be there.
    }
    if (load !== this.loads) return; // another load (or chat) took over
    // A cross-origin frame cannot be told to reload; a fresh element loads the page anew.
    const fresh = this.els.frame.cloneNode(false);
    fresh.hidden = false;
    fresh.addEventListener("load", this.onLoad);
    fresh.src = src;
    this.els.frame.replaceWith(fresh);
    this.els.frame = fresh;
  }

  async openTab(event) {
    if (!this.url) return;
    // The new tab needs its own sign-in link; open the window first (popup blockers allow
    // only windows opened in the click itself), then send it there.
    event.preventDefault();
    const tab = window.open("", "_blank");
    let target = this.url;
    try {
      if (this.sandboxId) target = await this.signIn(this.sandboxId);
    } catch {
      // The plain URL asks the user to sign in, which is better than nothing.
    }
    if (tab) {
      tab.opener = null;
      tab.location.href = target;
    }
  }

  show(state) {
    this.state = state;
    const { overlay, state: label } = this.els;
    overlay.hidden = state === "live";
    overlay.querySelector(".overlay-text").textContent = WORDS[state] || "";
    overlay.classList.toggle("busy", state === "starting" || state === "waiting");
    label.textContent = LABELS[state];
    label.dataset.state = state;
  }
}
