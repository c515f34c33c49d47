"""Cancelling a run against a real ``kiln serve``: a slow replay (a recording that thinks for
about a minute, picked in the settings) is stopped with the Cancel button and ends in the
cancelled state, after which a new message can be sent."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.web.conftest import screenshot
from tests.web.kiln_service import SLOW_RECORDING
from tests.web.recording import choose_demo, send_message


def test_cancel_stops_a_slow_run(kiln_page: Page) -> None:
    page = kiln_page
    choose_demo(page, SLOW_RECORDING)
    send_message(page, "think it over")
    expect(page.locator(".thinking-text")).to_contain_text("Step 3:")
    cancel = page.get_by_role("button", name="Cancel")
    cancel.click()
    footer = page.locator(".run-footer[data-state='cancelled']")
    footer.wait_for(timeout=60_000)
    expect(footer).to_contain_text("Cancelled")
    expect(page.locator(".thinking-text")).not_to_contain_text("Step 399:")
    expect(cancel).to_be_hidden()
    expect(page.get_by_role("button", name="Send")).to_be_enabled()
    expect(page.get_by_role("status")).to_have_text("Finished: Cancelled.")
    screenshot(page, "cancelled")
