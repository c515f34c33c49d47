// The live preview: an iframe on kiln's preview proxy (`http://<sandbox>.preview.<host>:<port>/`).
//
// The UI's session cookie is never sent to a preview host, so every load goes through a
// one-time sign-in link (`POST /api/sandboxes/{id}/preview-login`) that sets the preview host's
// own cookie and redirects to `/`. Once loaded, the frame keeps its page: Vite's HMR updates it
// as files land; it is loaded again when a run ends (the same element, a new `src`: whatever the
// frame went through mid-run, the finished app shows) and on request.
//
// While a run writes files the panel says "Building…" and the frame is not (re)loaded: the
// server holds the dev server's hot updates until the run's `preview_ready` (files whole,
// installs done), so a half-built app and Vite's error overlay never show.
//
// The state shown comes from the sandbox's real readiness (`GET /api/sandboxes/{id}/preview`,
// polled), never from the frame having loaded something: the frame also "loads" the proxy's
// retrying page or an error page. A sandbox that is gone says so.
//
// What the app's page reports (errors, console lines, failed requests) is followed per sandbox
// by a `watcher` (app.js wires PreviewErrorStream to PreviewConsole): it is told which sandbox
// the panel shows, and that the frame loads again (its old page's reports are gone).

const WORDS = {
  empty: "The preview appears here once kiln has started your app.",
  waiting: "Waiting for the app's sandbox…",
  starting: "Starting the preview…",
  building: "Building the app: it shows here once its files and packages are complete…",
  failed: "The preview could not be opened.",
  gone: "This preview's sandbox is gone. Send a message to build the app again.",
};
const LABELS = {
  live: "Live", building: "Building…", starting: "Starting", waiting: "Waiting", empty: "", failed: "Error", gone: "Gone",
};
// How often readiness is asked: often while the preview is not live, now and then once it is
// (a dev server may crash, a sandbox may be reaped).
const CHECK_MS = { live: 5000, other: 1000 };

export class PreviewPanel {
  /**
   * @param {{frame: HTMLIFrameElement, overlay: HTMLElement, state: HTMLElement,
   *          address: HTMLElement, reload: HTMLButtonElement, open: HTMLAnchorElement}} els
   * @param {(sandboxId: string) => Promise<string>} signIn  a one-time sign-in URL
   * @param {(sandboxId: string) => Promise<{state: string, code: string, message: string}>} readiness
   * @param {{follow: (sandboxId: string | null) => void, reloaded: () => void}} watcher
   */
  constructor(els, signIn, readiness, watcher = { follow() {}, reloaded() {} }) {
    this.els = els;
    this.watcher = watcher;
    this.signIn = signIn;
    this.readiness = readiness;
    this.url = null;
    this.loads = 0;
    this.timer = null;
    this.building = false;
    els.reload.addEventListener("click", () => this.reload());
    els.open.addEventListener("click", (event) => this.openTab(event));
    this.reset();
  }

  /** No preview (another chat). */
  reset() {
    this.url = null;
    this.building = false;
    this.sandboxId = null;
    this.watcher.follow(null);
    this.loads += 1;
    clearTimeout(this.timer);
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

  /** A run writes files: say "Building…" and keep the frame as it is until `complete()`. */
  build() {
    this.building = true;
    if (!this.url) return;
    this.loads += 1; // the checks of the last load stop: the frame waits for the complete state
    clearTimeout(this.timer);
    this.show("building");
  }

  /** The run's files are whole and its installs done (`preview_ready`): load the frame. */
  complete() {
    if (!this.building) return;
    this.building = false;
    if (this.url && this.state !== "gone") this.load();
  }

  /** The run is over (complete or not): nothing is held any more. */
  stopBuilding() {
    this.building = false;
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
    this.watcher.follow(sandboxId || null);
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

  /** A run is over: show what it built (a frame opened mid-run may have missed updates). */
  runEnded() {
    if (this.url && this.state !== "gone") this.load();
  }

  async load() {
    const load = ++this.loads;
    if (this.building) return this.build();
    if (this.state !== "live") this.show("starting");
    let src = this.url;
    try {
      if (this.sandboxId) src = await this.signIn(this.sandboxId);
    } catch (exc) {
      if (exc?.status === 404 && load === this.loads) return this.gone();
      // Otherwise the plain URL: a cookie from an earlier sign-in may still be there.
    }
    if (load !== this.loads) return undefined; // another load (or chat) took over
    // The same element (a page holding it keeps it); a new src navigates even a cross-origin
    // frame, and setting the attribute navigates even when the value is unchanged.
    this.els.frame.hidden = false;
    this.els.frame.src = src;
    this.watcher.reloaded();
    this.checks = 0;
    this.check(load);
    return undefined;
  }

  /** Ask whether the preview is ready, show the answer, and ask again later. */
  async check(load) {
    clearTimeout(this.timer);
    let answer = null;
    try {
      if (this.sandboxId) answer = await this.readiness(this.sandboxId);
    } catch (exc) {
      if (load !== this.loads) return;
      if (exc?.status === 404) return this.gone();
      // A blip (network, an outage): keep what is shown and ask again.
    }
    if (load !== this.loads) return;
    if (answer) this.showReadiness(answer);
    if (load !== this.loads) return; // showing it loaded the frame again, with its own checks
    const delay = this.state === "live" ? CHECK_MS.live : CHECK_MS.other;
    this.timer = setTimeout(() => this.check(load), delay);
  }

  showReadiness({ state, message }) {
    // Ready only after this load's first answer: the frame may hold the retrying page or a page
    // whose scripts failed meanwhile, so it loads again (a sign-in link works once).
    const waited = state === "ready" && this.state !== "live" && this.checks > 0;
    this.checks += 1;
    if (state === "ready") this.show("live");
    else if (state === "failing") this.show("failed", message);
    else this.show("starting");
    if (waited) this.load();
  }

  gone() {
    clearTimeout(this.timer);
    this.watcher.follow(null);
    this.els.frame.removeAttribute("src");
    this.els.frame.hidden = true;
    this.els.reload.disabled = true;
    this.els.open.removeAttribute("href");
    this.els.open.setAttribute("aria-disabled", "true");
    this.show("gone");
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

  /** Show `state`; `detail` (a message in words from the server) follows its sentence. */
  show(state, detail = "") {
    this.state = state;
    const { overlay, state: label } = this.els;
    overlay.hidden = state === "live";
    const words = WORDS[state] || "";
    overlay.querySelector(".overlay-text").textContent = detail ? `${words} ${capitalized(detail)}.` : words;
    overlay.classList.toggle("busy", ["starting", "waiting", "building"].includes(state));
    label.textContent = LABELS[state];
    label.dataset.state = state;
  }
}

const capitalized = (text) => text.charAt(0).toUpperCase() + text.slice(1);
