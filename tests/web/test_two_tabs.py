"""Two tabs on one chat against a real ``kiln serve``: a message sent in the second tab while the
first one's run is going shows that run, live, with a sentence in words, instead of the raw
admission refusal ("1 active run(s), the limit is 1"); the message waits in the composer."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.web.conftest import PageProblems, screenshot
from tests.web.kiln_service import SLOW_RECORDING
from tests.web.recording import choose_demo, send_message

NEW_CHAT = """async () => {
  const response = await fetch('/api/chats', { method: 'POST',
    headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ title: 'two tabs' }) });
  return (await response.json()).chat.id;
}"""


def test_a_second_tab_shows_the_run_instead_of_an_error(
    kiln_page: Page, page_problems: PageProblems
) -> None:
    page_problems.allow.append(re.compile(r"status of 429 .*/messages"))  # the refusal itself
    first = kiln_page
    chat_id = first.evaluate(NEW_CHAT)
    url = f"{first.url.split('#')[0]}#/chats/{chat_id}"
    first.goto(url)
    second = first.context.new_page()
    second.on("console", page_problems.console)
    second.on("pageerror", page_problems.page_error)
    second.goto(url)
    second.locator("#app").wait_for(state="visible")

    choose_demo(first, SLOW_RECORDING)
    send_message(first, "think it over")
    expect(first.locator(".thinking-text")).to_contain_text("Step 3:")

    send_message(second, "and make it blue")
    error = second.locator("#page-error")
    expect(error).to_contain_text("already building")
    expect(error).not_to_contain_text("active run(s)")
    expect(second.locator(".run-footer[data-state='running']")).to_be_visible()
    expect(second.locator(".thinking-text")).to_contain_text("Step 5:")  # live
    expect(second.get_by_label("Message")).to_have_value("and make it blue")
    screenshot(second, "second-tab-shows-the-run")

    second.get_by_role("button", name="Cancel").click()  # either tab may stop it
    expect(first.locator(".run-footer[data-state='cancelled']")).to_be_visible(timeout=60_000)
    second.close()
