"""The Environment tab against a real ``kiln serve``: a variable is shown with its value and a
public badge for ``VITE_``; a secret is shown masked and its value never reaches the page again;
a ``VITE_`` secret is refused in words before anything is sent; a variable is deleted."""

from __future__ import annotations

import json

from playwright.sync_api import Page, expect

from tests.web.conftest import screenshot
from tests.web.kiln_service import KilnService
from tests.web.recording import page_fetch

SECRET = "sk_live_env-panel-0123456789"
CREATE = """async () => { const response = await fetch('/api/chats', {method: 'POST',
  headers: {'Content-Type': 'application/json'}, body: JSON.stringify({title: 'env'})});
  return (await response.json()).chat.id }"""


def _open_env_tab(page: Page, kiln: KilnService) -> str:
    chat_id = str(page.evaluate(CREATE))
    page.goto(f"{kiln.base_url}/#/chats/{chat_id}")
    page.get_by_role("tab", name="Environment").click()
    return chat_id


def test_variables_and_write_only_secrets(kiln_page: Page, kiln: KilnService) -> None:
    page = kiln_page
    chat_id = _open_env_tab(page, kiln)
    panel = page.locator("#panel-env")
    expect(panel.get_by_role("status")).to_have_text("")
    panel.get_by_label("Name").fill("VITE_API_URL")
    expect(panel.locator("#env-hint")).to_contain_text("anyone who opens the app can read")
    panel.get_by_label("Value").fill("https://api.example.test")
    panel.get_by_role("button", name="Save").click()
    expect(panel.get_by_role("status")).to_contain_text("VITE_API_URL saved")
    row = panel.locator('.env-row[data-name="VITE_API_URL"]')
    expect(row).to_contain_text("https://api.example.test")
    expect(row.locator(".env-public")).to_have_text("public")

    panel.get_by_label("Name").fill("STRIPE_KEY")
    panel.get_by_label("Secret").check()
    expect(panel.get_by_label("Value")).to_have_attribute("type", "password")
    panel.get_by_label("Value").fill(SECRET)
    panel.get_by_role("button", name="Save").click()
    expect(panel.get_by_role("status")).to_contain_text("STRIPE_KEY saved")
    secret_row = panel.locator('.env-row[data-name="STRIPE_KEY"]')
    expect(secret_row.locator(".env-value")).to_have_text("••••••••")
    expect(secret_row.locator(".env-secret")).to_have_text("secret")
    screenshot(page, "env-panel")
    page.reload()
    page.get_by_role("tab", name="Environment").click()
    expect(panel.locator('.env-row[data-name="STRIPE_KEY"]')).to_be_visible()
    assert SECRET not in page.content()
    listed = page_fetch(page, f"/api/chats/{chat_id}/env")
    assert listed.status == 200
    assert SECRET not in listed.text
    assert {item["name"] for item in json.loads(listed.text)["variables"]} == {
        "STRIPE_KEY",
        "VITE_API_URL",
    }

    panel.get_by_role("button", name="Edit STRIPE_KEY").click()
    expect(panel.get_by_label("Value")).to_have_value("")
    panel.get_by_label("Name").fill("VITE_STRIPE_KEY")
    expect(panel.locator("#env-hint")).to_contain_text("A secret cannot start with VITE_")
    panel.get_by_role("button", name="Save").click()
    expect(panel.get_by_role("status")).to_contain_text("would make it public")
    assert "VITE_STRIPE_KEY" not in page_fetch(page, f"/api/chats/{chat_id}/env").text

    panel.get_by_role("button", name="Delete STRIPE_KEY").click()
    expect(panel.get_by_role("status")).to_contain_text("STRIPE_KEY deleted")
    expect(panel.locator('.env-row[data-name="STRIPE_KEY"]')).to_have_count(0)
