"""Editing text in place in a real Chromium against a real ``kiln serve`` (issue 26): the demo
app's heading gets a new title without a model turn, the preview shows it by hot update, a
version is recorded; text built from expressions becomes a suggested message instead.

The person does what the panel offers: turns on Select, double-clicks the element in the
preview, types over its text and presses Enter (the preview's selector, sandbox/preview/select.js,
then posts ``kiln-text-edit`` to the UI); a forged message from another window changes nothing.
"""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import Frame, Page, expect

from tests.web.conftest import RUN_LIMIT_MS, PageProblems, screenshot
from tests.web.recording import page_fetch, send_message

COMPLETED = ".run-footer[data-state='completed']"
APP = "src/App.jsx"


def build_demo(page: Page) -> tuple[str, str]:
    """Build the demo app in a new chat; ``(chat id, sandbox id)`` once its preview shows it."""
    send_message(page, "make me a todo app")
    page.locator(COMPLETED).wait_for(timeout=RUN_LIMIT_MS)
    page.frame_locator("#preview-frame").get_by_role("heading", name="Todos").wait_for()
    chat_id = page.url.rsplit("/", 1)[-1]
    runs = page_fetch(page, f"/api/chats/{chat_id}").json()["runs"]
    return chat_id, runs[-1]["sandbox_id"]


def source_place(page: Page, sandbox_id: str, needle: str) -> tuple[int, int]:
    """(line from 1, column from 0) of ``needle`` in the app's ``src/App.jsx``: what the
    element's ``data-kiln-source`` will say."""
    source = page_fetch(page, f"/api/sandboxes/{sandbox_id}/files/{APP}").text
    for number, line in enumerate(source.splitlines(), start=1):
        if needle in line:
            return number, line.index(needle)
    raise AssertionError(f"{needle!r} is not in {APP}")


def preview_frame(page: Page) -> Frame:
    frame = page.locator("#preview-frame").element_handle().content_frame()
    assert frame is not None
    return frame


def edit_message(place: tuple[int, int], tag: str, old: str, new: str) -> dict[str, Any]:
    """The selector's message for element ``tag`` at ``place`` retyped from ``old`` to ``new``."""
    line, column = place
    return {
        "type": "kiln-text-edit",
        "file": APP,
        "line": line,
        "column": column,
        "tag": tag,
        "old_text": old,
        "new_text": new,
    }


LISTEN_IN_FRAME = """() => { window.kilnResults = [];
  window.addEventListener("message", (event) => window.kilnResults.push(event.data)); }"""


def type_new_text(page: Page, tag: str, old: str, new: str) -> tuple[int, int]:
    """In select mode, double-click element ``tag`` showing ``old``, type ``new``, press Enter
    (the frame also listens for the outcome: ``frame_results``); the element's ``(line,
    column)`` as its ``data-kiln-source`` gives them."""
    frame = preview_frame(page)
    frame.evaluate(LISTEN_IN_FRAME)
    page.locator("#preview-select").click()
    expect(page.locator("#preview-select")).to_have_attribute("aria-pressed", "true")
    source = frame.locator(tag, has_text=old).first.get_attribute("data-kiln-source") or ""
    file, line, column = source.rsplit(":", 2)
    assert file == APP, source
    element = frame.locator(f'[data-kiln-source="{source}"]')  # its text is about to change
    element.dblclick()
    expect(element).to_have_attribute("contenteditable", "plaintext-only")
    element.press("Control+a")
    element.type(new)
    element.press("Enter")
    return int(line), int(column)


def frame_results(page: Page) -> list[dict[str, Any]]:
    """The outcomes the UI posted to the preview frame since :func:`type_new_text`."""
    frame = preview_frame(page)
    results_only = "window.kilnResults.filter(m => m.type === 'kiln-text-edit-result')"
    frame.wait_for_function(f"() => {results_only}.length > 0")
    results: list[dict[str, Any]] = frame.evaluate(f"() => {results_only}")
    return results  # (the UI also tells the frame when select mode goes on)


def test_the_heading_gets_a_new_title_without_a_model_turn(kiln_page: Page) -> None:
    page = kiln_page
    chat_id, sandbox_id = build_demo(page)
    versions_before = len(page_fetch(page, f"/api/chats/{chat_id}/versions").json()["versions"])
    forged = edit_message(source_place(page, sandbox_id, "<h1>"), "h1", "Todos", "Forged")
    page.evaluate("message => window.postMessage(message, '*')", forged)  # not from the preview
    place = type_new_text(page, "h1", "Todos", "Our week")

    note = f"Edited text in {APP} (version {versions_before + 1}, no model used)."
    expect(page.locator(".chat-note")).to_have_text([note])  # the forged one made none
    app = page.frame_locator("#preview-frame")
    expect(app.get_by_role("heading", name="Our week")).to_be_visible()
    source = page_fetch(page, f"/api/sandboxes/{sandbox_id}/files/{APP}").text
    assert "      <h1>Our week</h1>\n" in source
    line, column = place
    assert frame_results(page) == [
        {
            "type": "kiln-text-edit-result",
            "file": APP,
            "line": line,
            "column": column,
            "ok": True,
            "version": versions_before + 1,
        }
    ]
    expect(page.locator(".run-footer")).to_have_count(1)  # no run: no model was asked
    assert len(page_fetch(page, f"/api/chats/{chat_id}").json()["runs"]) == 1
    page.get_by_role("tab", name="Versions").click()
    newest = page.locator("#versions-list .version").first
    expect(newest.locator(".version-title")).to_have_text(
        f"Version {versions_before + 1} · Edited text in {APP}"
    )
    screenshot(page, "text-edit-applied")

    page.reload()  # the transcript shows the edit where it was made, after the run
    expect(page.locator("#messages > .msg").last).to_have_text(note)
    expect(page.locator("#messages > .msg.assistant")).to_have_count(1)


def test_text_from_expressions_becomes_a_suggested_message(
    kiln_page: Page, page_problems: PageProblems
) -> None:
    page = kiln_page
    page_problems.allow.append(re.compile(r"status of 409"))  # the refusal, shown in words
    chat_id, _ = build_demo(page)
    line, _ = type_new_text(page, "span", "0 open, 0 done", "nothing left")

    expect(page.locator(".chat-note.refused")).to_contain_text("built from expressions")
    expect(page.locator("#message-input")).to_have_value(
        f'Change the text of <span> in {APP}:{line} to "nothing left"'
    )
    results = frame_results(page)
    assert [(r["type"], r["ok"], r["code"]) for r in results] == [
        ("kiln-text-edit-result", False, "text_edit_expression")
    ]
    expect(page.locator("#selection-chips")).to_contain_text(f"{APP}:{line}")  # asked about it
    versions = page_fetch(page, f"/api/chats/{chat_id}/versions").json()["versions"]
    assert all(version["note"] != f"Edited text in {APP}" for version in versions)
    screenshot(page, "text-edit-refused")
