"""The live preview against a real ``kiln serve``: the iframe goes through kiln's preview proxy
(signing in on the preview host) and renders the demo app's heading; reload and "open in new
tab" work; a gone sandbox says so."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.web.conftest import RUN_LIMIT_MS, PageProblems, fake_base_url, screenshot, sign_in
from tests.web.fake_service import FakeService
from tests.web.recording import PREVIEW_URL, send_message


def test_the_preview_renders_the_app(kiln_page: Page, demo_chat: str) -> None:
    page = kiln_page
    page.goto(demo_chat)
    heading = page.frame_locator("#preview-frame").get_by_role("heading", name="Todos")
    heading.wait_for(timeout=RUN_LIMIT_MS)
    expect(page.locator("#preview-state")).to_have_text("Live")
    link = page.get_by_role("link", name="Open in new tab")
    expect(link).to_have_attribute("href", re.compile(PREVIEW_URL))
    screenshot(page, "preview-live")

    page.get_by_role("button", name="Reload").click()
    page.frame_locator("#preview-frame").get_by_role("heading", name="Todos").wait_for()

    with page.context.expect_page() as opened:
        link.click()
    tab = opened.value
    tab.get_by_role("heading", name="Todos").wait_for()
    tab.close()


def test_a_gone_sandbox_says_so(
    page: Page, fake_service: FakeService, page_problems: PageProblems
) -> None:
    """Its sandbox removed (reaped, say), the preview says so in words, while the page is open
    (readiness is asked now and then) and after a reload, never "sign in to see the preview"."""
    page_problems.allow.append(re.compile(r"status of 404"))  # the UI asking about the sandbox
    sign_in(page, f"{fake_base_url(fake_service)}/login?token={fake_service.login_token}")
    send_message(page, "make me a todo app")
    page.locator(".run-footer[data-state='completed']").wait_for(timeout=60_000)
    page.frame_locator("#preview-frame").get_by_role("heading", name="Todos").wait_for()
    expect(page.locator("#preview-state")).to_have_text("Live")

    fake_service.files.clear()  # every sandbox is gone
    overlay = page.locator("#preview-overlay")
    expect(overlay).to_contain_text("This preview's sandbox is gone")
    expect(page.locator("#preview-state")).to_have_text("Gone")
    expect(page.locator("#preview-frame")).to_be_hidden()
    page.reload()
    expect(overlay).to_contain_text("This preview's sandbox is gone")
    expect(overlay).not_to_contain_text("sign in")
    screenshot(page, "preview-gone")
