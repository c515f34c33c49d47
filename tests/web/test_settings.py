"""Provider settings against a real ``kiln serve``: with no key the page says the demo replay is
used; a pasted key is checked, stored (``PUT /api/me/keys/{provider}``) and never shown again."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.web.conftest import PageProblems, screenshot

KEY = "sk-ant-" + "k1ln-test-key-0123456789abcdef"


def test_a_key_is_stored_and_never_shown_again(
    kiln_page: Page, page_problems: PageProblems
) -> None:
    page_problems.allow.append(re.compile(r"status of 422 .*/api/me/keys/"))  # the bad key
    page = kiln_page
    expect(page.locator("#demo-notice")).to_contain_text("replays the recording")
    page.get_by_role("button", name="Settings").click()
    dialog = page.get_by_role("dialog", name="Provider settings")
    dialog.get_by_label("Provider").select_option("anthropic")
    expect(dialog.get_by_label("Model")).to_have_value("claude-sonnet-4-6")
    key = dialog.get_by_label("API key")
    expect(key).to_have_attribute("type", "password")

    key.fill("not-a-key")
    dialog.get_by_role("button", name="Save key").click()
    expect(dialog.get_by_role("status")).to_contain_text("does not look like")

    key.fill(KEY)
    dialog.get_by_role("button", name="Save key").click()
    expect(dialog.get_by_role("status")).to_contain_text("Key saved")
    expect(key).to_have_value("")
    expect(dialog.get_by_label("Provider")).to_contain_text("Anthropic (key stored)")
    screenshot(page, "settings-key-saved")
    dialog.get_by_role("button", name="Use this").click()

    expect(page.locator("#provider-badge")).to_have_text("Anthropic · claude-sonnet-4-6")
    expect(page.locator("#demo-notice")).to_be_hidden()
    me = page.request.get(page.url.split("#")[0] + "api/me").json()
    assert "anthropic" in me["providers"]
    page.reload()
    assert KEY not in page.content()
