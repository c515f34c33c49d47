"""The live preview against a real ``kiln serve``: the iframe goes through kiln's preview proxy
(signing in on the preview host) and renders the demo app's heading; reload and "open in new
tab" work."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.web.conftest import RUN_LIMIT_MS, screenshot
from tests.web.recording import PREVIEW_URL


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
