"""What the browser tests expect of the demo recording, and small page helpers they share.

The expectations are computed from ``app/demos/todo-app.txt`` with the real parser, so they
follow the recording if it changes.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from playwright.sync_api import Page, expect

from parser import StreamParser

DEMO = Path(__file__).resolve().parents[2] / "app" / "demos" / "todo-app.txt"
# What kiln's preview address looks like on the tests' loopback service.
PREVIEW_URL = r"^http://[a-z0-9-]+\.preview\.(kiln\.)?localhost:\d+/$"


@functools.cache
def _demo_events() -> tuple[dict[str, str], ...]:
    parser = StreamParser()
    events = parser.feed(DEMO.read_text()) + parser.close()
    return tuple(event.to_dict() for event in events)


def demo_prose() -> str:
    """The demo answer's prose (its ``text`` events joined)."""
    return "".join(e["content"] for e in _demo_events() if e["type"] == "text")


def demo_thinking() -> str:
    """The demo answer's thinking."""
    return "".join(e["content"] for e in _demo_events() if e["type"] == "thinking_content")


def demo_files() -> dict[str, str]:
    """Each file of the demo answer and its content, as the parser delivers it."""
    files: dict[str, str] = {}
    for event in _demo_events():
        if event["type"] == "file_start":
            files[event["path"]] = ""
        elif event["type"] == "file_content":
            files[event["path"]] += event["content"]
    return files


DEMO_FILES = tuple(e["path"] for e in _demo_events() if e["type"] == "file_start")


def normalized(text: str) -> str:
    """``text`` with runs of whitespace made one space (HTML layout does not keep them)."""
    return " ".join(text.split())


def send_message(page: Page, text: str) -> None:
    """Type ``text`` in the message box and press Enter."""
    box = page.get_by_label("Message")
    box.fill(text)
    box.press("Enter")


def tree_paths(page: Page) -> set[str]:
    """The paths the file tree lists."""
    buttons = page.locator("#file-tree button[data-path]")
    return {buttons.nth(i).get_attribute("data-path") or "" for i in range(buttons.count())}


def choose_demo(page: Page, recording: str) -> None:
    """Pick the replay provider with ``recording`` in the settings dialog."""
    page.get_by_role("button", name="Settings").click()
    dialog = page.get_by_role("dialog", name="Provider settings")
    dialog.get_by_label("Provider").select_option("replay")
    dialog.get_by_label("Model").select_option(recording)
    dialog.get_by_role("button", name="Use this").click()
    expect(page.locator("#provider-badge")).to_have_text(f"Demo · {recording}")


@dataclass(frozen=True)
class Fetched:
    """What the page's own ``fetch`` of an API path got."""

    status: int
    text: str

    def json(self) -> Any:
        """The body as JSON."""
        return json.loads(self.text)


FETCH = """async (path) => { const response = await fetch(path);
  return { status: response.status, text: await response.text() }; }"""


def page_fetch(page: Page, path: str) -> Fetched:
    """GET ``path`` (``/api/...``) as the UI's own script does, with its session. Playwright's
    ``page.request`` resolves host names with the system's resolver, which does not know
    ``kiln.localhost`` (browsers resolve ``*.localhost`` themselves)."""
    answer = page.evaluate(FETCH, path)
    return Fetched(int(answer["status"]), str(answer["text"]))
