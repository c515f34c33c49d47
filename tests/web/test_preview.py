"""The live preview against a real ``kiln serve``: the iframe goes through kiln's preview proxy
(signing in on the preview host) and renders the demo app's heading; reload and "open in new
tab" work; the app in the pane keeps its storage; kiln opened by another name is sent to its
own; a gone sandbox says so."""

from __future__ import annotations

import re
import secrets

from playwright.sync_api import Page, expect

from tests.web.conftest import RUN_LIMIT_MS, PageProblems, fake_base_url, screenshot, sign_in
from tests.web.fake_service import FakeService
from tests.web.kiln_service import KilnService
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


def test_the_app_in_the_pane_keeps_a_todo_over_a_reload(kiln_page: Page, demo_chat: str) -> None:
    """The demo todo app, used inside the pane: Add works and the todo is still there after the
    page is reloaded (it lives in the app's localStorage, which Chromium refused in the frame as
    third-party storage while previews were another site than the UI)."""
    page = kiln_page
    page.goto(demo_chat)
    expect(page.locator("#preview-state")).to_have_text("Live", timeout=RUN_LIMIT_MS)
    app = page.frame_locator("#preview-frame")
    app.get_by_role("heading", name="Todos").wait_for()
    title = f"Water the plants {secrets.token_hex(3)}"
    app.get_by_label("Todo title").fill(title)
    app.get_by_role("button", name="Add").click()
    expect(app.get_by_text(title)).to_be_visible()

    page.reload()
    expect(page.locator("#preview-state")).to_have_text("Live")
    expect(page.frame_locator("#preview-frame").get_by_text(title)).to_be_visible()
    screenshot(page, "preview-app-storage")


def test_kiln_opened_by_its_ip_address_goes_to_its_own_address(
    kiln_page: Page, kiln: KilnService
) -> None:
    """The README's old address (``127.0.0.1:<port>``) lands on the UI at its public address,
    where the preview pane works, instead of a UI whose preview the browser refuses."""
    page = kiln_page
    port = kiln.base_url.rsplit(":", 1)[1]
    page.goto(f"http://127.0.0.1:{port}/")
    expect(page).to_have_url(f"{kiln.base_url}/")
    page.locator("#app").wait_for(state="visible")


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
