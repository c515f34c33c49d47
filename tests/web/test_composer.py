"""The composer against the stand-in service: one send per Enter or click while a request is
out (a double Enter made two chats), a chat is created only with an accepted first message, the
server's length limit is shown before sending, and a reply that lands after another chat was
opened is not drawn into that chat."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.web.conftest import PageProblems, fake_base_url, screenshot, sign_in
from tests.web.fake_service import FakeService
from tests.web.recording import send_message

SLOW_POST_SECONDS = 0.8  # the server takes this long to accept a message


def _open(page: Page, service: FakeService) -> None:
    sign_in(page, f"{fake_base_url(service)}/login?token={service.login_token}")


def test_a_double_enter_sends_once_and_makes_one_chat(
    page: Page, fake_service: FakeService
) -> None:
    fake_service.post_delay = SLOW_POST_SECONDS
    _open(page, fake_service)
    box = page.get_by_label("Message")
    box.fill("make me a todo app")
    box.press("Enter")
    expect(page.get_by_role("button", name="Send")).to_be_disabled()
    box.press("Enter")
    page.get_by_role("button", name="Send").click(force=True)  # disabled: must do nothing
    page.locator(".run-footer[data-state='completed']").wait_for()
    expect(page.locator("#chat-list .chat-link")).to_have_count(1)
    expect(page.locator(".msg.user")).to_have_count(1)
    assert len(fake_service.chats) == 1
    assert len(fake_service.runs) == 1
    expect(box).to_have_value("")


def test_a_refused_first_message_leaves_no_chat_and_keeps_the_text(
    page: Page, fake_service: FakeService, page_problems: PageProblems
) -> None:
    page_problems.allow.append(re.compile(r"status of 429"))
    fake_service.refusal = (429, "admission_refused", "you have 2 active runs, the limit is 2")
    _open(page, fake_service)
    send_message(page, "make me a todo app")
    expect(page.locator("#page-error")).to_have_text("you have 2 active runs, the limit is 2")
    expect(page.locator("#chat-list")).to_have_text("No chats yet.")
    expect(page.get_by_label("Message")).to_have_value("make me a todo app")
    assert fake_service.chats == {}
    fake_service.refusal = None
    page.get_by_role("button", name="Send").click()
    page.locator(".run-footer[data-state='completed']").wait_for()
    expect(page.locator("#chat-list .chat-link")).to_have_count(1)


def test_the_length_limit_shows_before_sending(page: Page, fake_service: FakeService) -> None:
    fake_service.message_limit = 40
    _open(page, fake_service)
    box, count = page.get_by_label("Message"), page.locator("#message-count")
    box.fill("x" * 10)
    expect(count).to_be_hidden()
    box.fill("x" * 35)
    expect(count).to_have_text("35 / 40 characters")
    box.fill("x" * 45)
    expect(count).to_have_text("45 / 40 characters: 5 too many to send")
    expect(box).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_role("button", name="Send")).to_be_disabled()
    box.press("Enter")
    screenshot(page, "composer-over-limit")
    assert fake_service.chats == {}
    box.fill("x" * 40)
    expect(page.get_by_role("button", name="Send")).to_be_enabled()
    box.press("Enter")
    page.locator(".run-footer[data-state='completed']").wait_for()
    assert len(fake_service.chats) == 1


def test_a_reply_after_another_chat_opened_stays_out_of_it(
    page: Page, fake_service: FakeService
) -> None:
    _open(page, fake_service)
    send_message(page, "the first chat")
    page.locator(".run-footer[data-state='completed']").wait_for()
    first = page.locator("#chat-list .chat-link").first
    page.get_by_role("button", name="+ New chat").click()
    expect(page.locator(".msg.user")).to_have_count(0)
    fake_service.post_delay = SLOW_POST_SECONDS
    send_message(page, "the second chat")
    first.click()
    expect(page.locator(".msg.user .bubble")).to_have_text(["the first chat"])
    expect(page.locator("#chat-list .chat-link")).to_have_count(2)  # listed once accepted
    expect(page.locator(".msg.user .bubble")).to_have_text(["the first chat"])
    expect(page.locator(".msg.assistant")).to_have_count(1)
    page.locator("#chat-list .chat-link", has_text="the second chat").click()
    expect(page.locator(".msg.user .bubble")).to_have_text(["the second chat"])
