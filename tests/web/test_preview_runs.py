"""The preview never hangs: demo runs in a row against a real ``kiln serve``, each in a new chat,
and every time the app's heading shows in the preview shortly after the run ends.

Each run has what made the preview hang (kiln issue 14): the frame opens at ``sandbox_ready``,
while ``zustand`` is being installed (once through the egress network, whose joining flushed
the container's conntrack entries; now through the npm proxy) and files are half written, so
the dev server's optimizer, its watcher, the proxy and the host firewall all get their chance
to hold the page. The recording is a compact todo app (same install, same kind of files, a
fraction of the text). The timings (run end -> heading visible) are printed; a failure's
message has what the frame's pages did (console, requests, HMR messages).

Six runs, not twenty: the rare empty frame twenty found (a page loading while Vite bundled the
dependencies again, its reload missed) has targeted tests that force it
(``tests/web/test_preview_reporter.py``).
"""

from __future__ import annotations

import statistics
import time
from collections import deque
from pathlib import Path

import docker
import pytest
from playwright.sync_api import ConsoleMessage, Page, Request, Response, WebSocket, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from sandbox.settings import LABEL
from tests.web.conftest import RUN_LIMIT_MS
from tests.web.kiln_service import KilnService
from tests.web.recording import choose_demo, send_message

RUNS = 6
# The goal: the heading within 3 s of the run's end. One slow run is tolerated (a loaded CI
# box); the hard limit is bounded, so a hang (the issue: 120 s, then raw JSON) fails at once.
SLOW_RUNS_TOLERATED = 1
HEADING_GOAL_SECONDS = 3.0
HEADING_LIMIT_SECONDS = 15.0
COMPACT_RECORDING = "todo-compact"
TRACE_LINES = 120
COMPACT_TODO_APP = """<Response>
A compact todo app.

<edward_install>
framework: vite-react
packages: zustand
</edward_install>

<edward_sandbox project="todo-app" base="vite-react">
<file path="src/main.jsx">
import React from "react";
import ReactDOM from "react-dom/client";
import App from "./App.jsx";
import "./index.css";

ReactDOM.createRoot(document.getElementById("root")).render(<App />);
</file>
<file path="src/store.js">
import { create } from "zustand";

export const useTodos = create((set) => ({
  items: ["Try kiln"],
  add: (title) => set((state) => ({ items: [...state.items, title] })),
}));
</file>
<file path="src/App.jsx">
import { useTodos } from "./store.js";

export default function App() {
  const items = useTodos((state) => state.items);
  return (
    <main>
      <h1>Todos</h1>
      <ul>{items.map((item) => <li key={item}>{item}</li>)}</ul>
    </main>
  );
}
</file>
<file path="src/index.css">
body { font-family: system-ui, sans-serif; margin: 2rem; }
</file>
</edward_sandbox>

<edward_command command="npm" args='["run","build"]'>
</Response>
<edward_done />
"""


class FrameTrace:
    """What the preview frame's pages did (console, requests, HMR messages), for a failure's
    message: the last :data:`TRACE_LINES` lines, each with its time since the trace began."""

    def __init__(self, page: Page) -> None:
        """Follow every preview page opened in ``page``'s frames from now on."""
        self.lines: deque[str] = deque(maxlen=TRACE_LINES)
        self.began = time.monotonic()
        page.on("console", self._console)
        page.on("response", self._response)
        page.on("requestfailed", self._failed)
        page.on("websocket", self._websocket)
        page.on("framenavigated", lambda frame: self._preview("navigated", frame.url))

    def restart(self) -> None:
        """Forget what was traced (a new run)."""
        self.lines.clear()
        self.began = time.monotonic()

    def note(self, kind: str, text: str) -> None:
        """Add a line."""
        self.lines.append(f"{time.monotonic() - self.began:7.2f} {kind}: {text[:300]}")

    def _preview(self, kind: str, url: str, text: str = "") -> None:
        if ".preview." in url:
            self.note(kind, f"{text} {url}" if text else url)

    def _console(self, message: ConsoleMessage) -> None:
        if ".preview." in message.location.get("url", ""):
            self.note("console", f"{message.type} {message.text}")

    def _response(self, response: Response) -> None:
        self._preview("response", response.url, f"{response.status} {response.status_text}")

    def _failed(self, request: Request) -> None:
        self._preview("failed", request.url, str(request.failure))

    def _websocket(self, socket: WebSocket) -> None:
        self._preview("websocket", socket.url, "open")
        socket.on("framereceived", lambda payload: self._preview("ws in", socket.url, str(payload)))
        socket.on("close", lambda _: self._preview("websocket", socket.url, "closed"))

    def __str__(self) -> str:
        return "\n".join(self.lines) or "nothing"


def _one_run(page: Page, number: int, trace: FrameTrace) -> float:
    """Send the message in a new chat; seconds from the run's end to the heading."""
    trace.restart()
    page.locator("#new-chat").click()
    send_message(page, f"make me a todo app ({number})")
    page.locator(".run-footer[data-state='completed']").wait_for(timeout=RUN_LIMIT_MS)
    ended = time.monotonic()
    trace.note("run", "completed")
    heading = page.frame_locator("#preview-frame").get_by_role("heading", name="Todos")
    try:
        heading.wait_for(timeout=HEADING_LIMIT_SECONDS * 1000)
    except PlaywrightTimeoutError:
        pytest.fail(
            f"run {number}: no heading {HEADING_LIMIT_SECONDS} s after the run's end; "
            f"{_preview_now(page)}; the dev server's last lines:\n{_dev_server_log(page)}\n"
            f"the preview frame's console, requests and HMR messages (s since the send):\n{trace}"
        )
    shown = time.monotonic() - ended
    expect(page.locator("#preview-state")).to_have_text("Live")
    return shown


def _preview_now(page: Page) -> str:
    """What the preview panel and its frame show, for a failure's message."""
    state = page.locator("#preview-state").inner_text()
    overlay = page.locator("#preview-overlay")
    words = overlay.inner_text() if overlay.is_visible() else "(no overlay)"
    frames = [f for f in page.frames if ".preview." in f.url]
    inside = [f"{f.url}: {f.locator('body').inner_text(timeout=2000)[:300]!r}" for f in frames]
    return f"state {state!r}, overlay {words!r}, frame {inside or 'none'}"


def _dev_server_log(page: Page) -> str:
    """The last lines the preview's dev server printed (its container's log), for a failure."""
    sandbox_ids = {f.url.split("//", 1)[-1].split(".", 1)[0] for f in page.frames}
    client = docker.from_env()
    try:
        containers = [
            c
            for sid in sandbox_ids
            for c in client.containers.list(filters={"label": f"{LABEL}={sid}"})
        ]
        return "\n".join(c.logs(tail=25).decode(errors="replace") for c in containers) or "none"
    finally:
        client.close()


@pytest.mark.npm
def test_the_preview_shows_the_app_after_every_one_of_many_runs(
    kiln: KilnService, kiln_page: Page
) -> None:
    # The service reads its recordings folder on each request (kiln_service writes it there).
    recordings = Path(kiln.log).parent / "recordings"
    (recordings / f"{COMPACT_RECORDING}.txt").write_text(COMPACT_TODO_APP)
    kiln_page.reload()  # the page learns the recordings from /api/me when it starts
    choose_demo(kiln_page, COMPACT_RECORDING)
    started = time.monotonic()
    trace = FrameTrace(kiln_page)
    timings = [_one_run(kiln_page, number, trace) for number in range(1, RUNS + 1)]
    total = time.monotonic() - started
    shown = ", ".join(f"{t:.2f}" for t in timings)
    print(
        f"\n{RUNS} runs in {total:.0f} s; run end -> heading (s): {shown}; "
        f"median {statistics.median(timings):.2f}, max {max(timings):.2f}"
    )
    slow = [round(t, 2) for t in timings if t > HEADING_GOAL_SECONDS]
    late = f"over {HEADING_GOAL_SECONDS} s after the run's end: {slow}"
    assert len(slow) <= SLOW_RUNS_TOLERATED, late
