"""The conversation against a real ``kiln serve`` with the demo replay: a message streams
thinking and prose while the run is active, and a page reload in the middle of the run
resumes the stream without showing anything twice (the prose, and every file's content,
come out exactly as recorded)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.web.conftest import RUN_LIMIT_MS, screenshot
from tests.web.kiln_service import SEARCH_QUERY, SEARCH_RECORDING
from tests.web.recording import (
    DEMO_FILES,
    PREVIEW_URL,
    choose_demo,
    demo_files,
    demo_prose,
    demo_thinking,
    normalized,
    send_message,
)

FILES_BEFORE_RELOAD = 2


def _assert_running(page: Page, when: str) -> None:
    footer = page.locator(".msg.assistant .run-footer")
    state = footer.get_attribute("data-state")
    assert state == "running", f"the demo run was already {state!r} {when}: nothing was tested"


@pytest.mark.npm
def test_a_message_streams_and_a_reload_mid_run_resumes_it(kiln_page: Page) -> None:
    page = kiln_page
    expect(page.locator("#demo-notice")).to_contain_text("Demo mode")
    send_message(page, "make me a todo app")
    expect(page.locator(".msg.user .bubble")).to_have_text("make me a todo app")
    expect(page.locator(".thinking-text")).to_contain_text(demo_thinking().split("\n")[1][:30])
    expect(page.locator(".prose").first).to_contain_text("Here is a todo app")
    expect(page.get_by_role("button", name="Cancel")).to_be_visible()
    _assert_running(page, "when its first prose arrived")
    screenshot(page, "chat-streaming")

    tree = page.locator("#file-tree button[data-path]")
    expect(tree.nth(FILES_BEFORE_RELOAD - 1)).to_be_attached(timeout=RUN_LIMIT_MS)
    _assert_running(page, f"after {FILES_BEFORE_RELOAD} files")
    page.reload()
    page.locator(".msg.assistant").wait_for()
    screenshot(page, "chat-after-reload")
    page.get_by_role("tab", name="Preview").click()
    expect(page.locator("#preview-address")).to_have_text(re.compile(PREVIEW_URL))
    screenshot(page, "preview-during-run")
    frame_mid_run = page.locator("#preview-frame").element_handle()

    page.locator(".run-footer[data-state='completed']").wait_for(timeout=RUN_LIMIT_MS)
    expect(page.locator(".msg.user")).to_have_count(1)
    expect(page.locator(".msg.assistant")).to_have_count(1)
    prose = " ".join(page.locator(".prose").all_inner_texts())
    assert normalized(prose) == normalized(demo_prose())
    thinking = page.locator(".thinking-text")
    assert normalized(thinking.text_content() or "") == normalized(demo_thinking())
    expect(thinking).to_be_hidden()  # collapsed once the thinking ended
    page.locator(".thinking summary").click()
    expect(thinking).to_be_visible()
    # The frame opened mid-run shows the finished app without the page reloading it (a reload
    # replaces the element): the files arrived through the dev server's HMR.
    page.get_by_role("tab", name="Preview").click()
    frame = page.frame_locator("#preview-frame")
    frame.get_by_role("heading", name="Todos").wait_for(timeout=RUN_LIMIT_MS)
    assert page.evaluate("frame => frame.isConnected", frame_mid_run)
    screenshot(page, "preview-after-run")
    install = page.locator(".card.step.install")
    expect(install).to_contain_text("Install zustand")
    expect(install.locator(".card-status")).to_have_text("exit 0")
    build = page.locator(".card.step.command").first
    expect(build).to_contain_text("npm run build")
    build.get_by_text(re.compile(r"^Output \(\d+ lines?\)$")).click()
    expect(build.locator(".card-output")).to_be_visible()
    page.get_by_role("tab", name="Log").click()
    expect(page.locator("#log-view")).to_contain_text("$ npm install zustand")
    expect(page.locator("#log-view")).to_contain_text("$ npm run build")
    page.get_by_role("tab", name="Files").click()
    for path in DEMO_FILES:
        page.locator(f"#file-tree button[data-path='{path}']").click()
        expect(page.locator("#code-path")).to_have_text(path)
        assert page.locator("#code-view").text_content() == demo_files()[path], path
    screenshot(page, "chat-finished")


def test_a_search_shows_as_a_card_and_the_turn_markers_say_why(kiln_page: Page) -> None:
    page = kiln_page
    choose_demo(page, SEARCH_RECORDING)
    send_message(page, "how do I show '5 minutes ago'?")
    page.locator(".run-footer[data-state='completed']").wait_for(timeout=RUN_LIMIT_MS)
    card = page.locator(".card.tool")
    expect(card).to_contain_text(f"Searching the web: {SEARCH_QUERY}")
    expect(card.locator(".card-status")).to_have_text(re.compile("done|failed"))
    markers = page.locator(".turn-marker.end")
    expect(markers).to_have_text(
        ["Turn 1 continues with the tool results", re.compile("^Turn 2 stopped: ")]
    )
    expect(page.locator(".prose").last).to_contain_text("built into every browser")
    screenshot(page, "chat-search-turns")
