"""Layout and keyboard: the page works at 1280x800 and at a phone's width, and the message box
sends on Enter and breaks lines on Shift+Enter (stand-in service: nothing here needs a real
run)."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.web.conftest import MOBILE, fake_base_url, screenshot, sign_in
from tests.web.fake_service import FakeService
from tests.web.recording import send_message


def _horizontal_overflow(page: Page) -> int:
    """How many pixels the page is wider than the window (0 when nothing sticks out)."""
    width: int = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    return width


def test_shift_enter_breaks_the_line_and_enter_sends(page: Page, fake_service: FakeService) -> None:
    sign_in(page, f"{fake_base_url(fake_service)}/login?token={fake_service.login_token}")
    box = page.get_by_label("Message")
    box.fill("first line")
    box.press("Shift+Enter")
    box.press_sequentially("second line")
    expect(box).to_have_value("first line\nsecond line")
    box.press("Enter")
    expect(page.locator(".msg.user .bubble")).to_have_text("first line\nsecond line")
    expect(box).to_have_value("")
    page.locator(".run-footer[data-state='completed']").wait_for(timeout=60_000)


def test_a_phone_sees_the_chat_and_the_workspace_one_at_a_time(
    page: Page, fake_service: FakeService
) -> None:
    page.set_viewport_size(MOBILE)
    sign_in(page, f"{fake_base_url(fake_service)}/login?token={fake_service.login_token}")
    send_message(page, "make me a todo app")
    page.locator(".run-footer[data-state='completed']").wait_for(timeout=60_000)
    assert _horizontal_overflow(page) <= 0
    expect(page.locator(".workspace")).to_be_hidden()
    screenshot(page, "mobile-chat")
    page.get_by_role("button", name="App & files").click()
    expect(page.locator(".chat-pane")).to_be_hidden()
    expect(page.get_by_role("tab", name="Preview")).to_be_visible()
    page.frame_locator("#preview-frame").get_by_role("heading", name="Todos").wait_for()
    assert _horizontal_overflow(page) <= 0
    screenshot(page, "mobile-preview")
    page.get_by_role("button", name="Chats").click()
    expect(page.get_by_role("link", name="make me a todo app")).to_be_visible()
    screenshot(page, "mobile-chat-list")
