"""The transcript follows a streaming answer unless the person scrolled up (then "↓ new" says
something arrived below), and a chat opens at its end. Against the stand-in service, whose demo
answer streams slowly enough to scroll during it, in a short window so that it overflows."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.web.conftest import fake_base_url, screenshot, sign_in
from tests.web.fake_service import FakeService
from tests.web.recording import send_message

AT_END = """() => { const m = document.getElementById('messages');
  return m.scrollHeight > m.clientHeight && m.scrollTop + m.clientHeight >= m.scrollHeight - 2; }"""
OVERFLOWING = """(rows) => { const m = document.getElementById('messages');
  return m.scrollHeight > m.clientHeight * rows; }"""


def test_the_chat_follows_the_answer_unless_scrolled_up(
    page: Page, fake_service: FakeService
) -> None:
    fake_service.pace = 0.05  # the demo answer streams for a while
    page.set_viewport_size({"width": 1280, "height": 520})
    sign_in(page, f"{fake_base_url(fake_service)}/login?token={fake_service.login_token}")
    send_message(page, "make me a todo app")
    page.wait_for_function(OVERFLOWING, arg=1.5)
    page.wait_for_function(AT_END)  # followed out of the first screen

    box = page.locator("#messages").bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.wheel(0, -600)
    jump = page.get_by_role("button", name="↓ new")
    expect(jump).to_be_visible()  # more came, below the view
    assert not page.evaluate(AT_END), "the chat pulled the reader back down"
    expect(page.locator(".run-footer[data-state='running']")).to_be_attached()
    screenshot(page, "chat-new-below")
    jump.click()
    page.wait_for_function(AT_END)
    expect(jump).to_be_hidden()

    page.locator(".run-footer[data-state='completed']").wait_for(timeout=60_000)
    page.wait_for_function(AT_END)  # still following to the very end
    page.reload()
    page.locator(".run-footer[data-state='completed']").wait_for()
    page.wait_for_function(AT_END)  # a chat opens at its end
