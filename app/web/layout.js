// Page layout: the workspace tabs (Preview, Files, Log) that follow the run unless the user
// picked one, the narrow-screen switch between the chat and the workspace, and the chat
// drawer on narrow screens.

export class Tabs {
  /** @param {HTMLElement} tablist  @param {(name: string) => void} onShow */
  constructor(tablist, onShow) {
    this.tabs = /** @type {HTMLElement[]} */ ([...tablist.querySelectorAll('[role="tab"]')]);
    this.onShow = onShow;
    this.auto = true;
    for (const tab of this.tabs) {
      tab.addEventListener("click", () => {
        this.auto = false;
        this.show(tab.dataset.tab);
      });
    }
    // Arrow keys move between tabs, as the ARIA tabs pattern expects.
    tablist.addEventListener("keydown", (e) => {
      const step = { ArrowRight: 1, ArrowLeft: -1 }[e.key];
      if (!step) return;
      const index = this.tabs.indexOf(/** @type {HTMLElement} */ (document.activeElement));
      const next = this.tabs[(index + step + this.tabs.length) % this.tabs.length];
      next.focus();
      next.click();
    });
  }

  /** Show tab `name`. */
  show(name) {
    for (const tab of this.tabs) {
      const selected = tab.dataset.tab === name;
      tab.setAttribute("aria-selected", String(selected));
      tab.tabIndex = selected ? 0 : -1;
      document.getElementById(tab.getAttribute("aria-controls")).hidden = !selected;
    }
    this.current = name;
    this.onShow(name);
  }

  /** Show `name` only if the user has not picked a tab during this run. */
  follow(name) {
    if (this.auto && this.current !== name) this.show(name);
  }
}

/** Wire the narrow-screen controls: the chat drawer and the chat/workspace switch. */
export function wireNarrowLayout(els) {
  const setDrawer = (open) => {
    document.body.classList.toggle("drawer-open", open);
    els.menu.setAttribute("aria-expanded", String(open));
  };
  els.menu.addEventListener("click", () => setDrawer(!document.body.classList.contains("drawer-open")));
  els.scrim.addEventListener("click", () => setDrawer(false));
  els.sidebar.addEventListener("click", (e) => {
    if (e.target.closest("a, button")) setDrawer(false);
  });
  for (const button of els.switchButtons) {
    button.addEventListener("click", () => showView(els, button.dataset.view));
  }
  showView(els, "chat");
}

/** On narrow screens, show the chat or the workspace. */
export function showView(els, view) {
  document.body.dataset.view = view;
  for (const button of els.switchButtons) {
    button.setAttribute("aria-pressed", String(button.dataset.view === view));
  }
}
