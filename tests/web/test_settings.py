"""Provider settings against a real ``kiln serve``: with no key the page says the demo replay is
used; a pasted key is checked, stored (``PUT /api/me/keys/{provider}``), never shown again, and
deleted (``DELETE``). Sign out ends this browser's session; Sign out everywhere ends every
browser's of the user.
Against the stand-in service: an OpenAI-compatible server is offered once the server has one,
every message carries the provider and model chosen at that moment, and each run's footer shows
its tokens in and out."""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, Request, Route, expect

from app.api.auth import HOST_SESSION_COOKIE, SESSION_COOKIE
from app.config import SECRET_FILE, load_or_create_secret
from app.store import Store
from tests.web.conftest import PageProblems, desktop_context, fake_base_url, screenshot, sign_in
from tests.web.fake_service import FakeService
from tests.web.kiln_service import KilnService
from tests.web.recording import choose_demo, page_fetch, send_message

# The UI's cookie: __Host-kiln_session on *.localhost, kiln_session elsewhere.
SESSION_COOKIES = (HOST_SESSION_COOKIE, SESSION_COOKIE)
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
    me = page_fetch(page, "/api/me").json()
    assert "anthropic" in me["providers"]
    page.reload()
    assert KEY not in page.content()

    # Deleted again: the provider is keyless, the demo replay is back and says why.
    page.get_by_role("button", name="Settings").click()
    dialog.get_by_label("Provider").select_option("anthropic")
    dialog.get_by_role("button", name="Delete key").click()
    expect(dialog.get_by_role("status")).to_have_text("Key deleted.")
    expect(dialog.get_by_role("button", name="Delete key")).to_be_hidden()
    expect(dialog.get_by_label("Provider")).not_to_contain_text("Anthropic (key stored)")
    dialog.get_by_role("button", name="Close").click()
    expect(page.locator("#demo-notice")).to_contain_text("no API key for Anthropic")
    me = page_fetch(page, "/api/me").json()
    assert "anthropic" not in me["providers"]


@pytest.fixture
def leaver(kiln: KilnService) -> Iterator[tuple[Store, str]]:
    """A user of the real service of their own (signing out everywhere must not end the other
    tests' sessions), in its store: ``(store, user id)``."""
    data = kiln.log.parent / "data"
    store = Store(data / "kiln.db", load_or_create_secret(data / SECRET_FILE))
    try:
        yield store, store.create_user(f"leaver-{secrets.token_hex(4)}").id
    finally:
        store.close()


def _signed_in(
    browser: Browser, kiln: KilnService, leaver: tuple[Store, str], problems: PageProblems
) -> tuple[BrowserContext, Page, str]:
    """A new browser signed in as the leaver: its context, page and session token."""
    store, user_id = leaver
    context = desktop_context(browser)
    page = context.new_page()
    page.on("console", problems.console)
    page.on("pageerror", problems.page_error)
    sign_in(page, f"{kiln.base_url}/login?token={store.create_token(user_id, 'login', 60)}")
    session = next(c["value"] for c in context.cookies() if c["name"] in SESSION_COOKIES)
    return context, page, session


def _sign_out_with(page: Page, button: str) -> None:
    page.get_by_role("button", name="Settings").click()
    dialog = page.get_by_role("dialog", name="Provider settings")
    screenshot(page, "settings-" + button.lower().replace(" ", "-"))
    dialog.get_by_role("button", name=button, exact=True).click()
    expect(page.locator("#signin")).to_be_visible()
    expect(page.locator("#app")).to_be_hidden()


def test_sign_out_ends_this_session_and_sign_out_everywhere_every_one(
    browser: Browser, kiln: KilnService, leaver: tuple[Store, str], page_problems: PageProblems
) -> None:
    store, _ = leaver
    first, page, session = _signed_in(browser, kiln, leaver, page_problems)
    second, other, other_session = _signed_in(browser, kiln, leaver, page_problems)
    third, last, last_session = _signed_in(browser, kiln, leaver, page_problems)
    try:
        _sign_out_with(page, "Sign out")
        assert not [c for c in first.cookies() if c["name"] in SESSION_COOKIES]
        assert store.user_for_token(session, "session") is None
        assert store.user_for_token(other_session, "session") is not None  # only this one

        _sign_out_with(other, "Sign out everywhere")
        screenshot(other, "signed-out-everywhere")
        for token in (other_session, last_session):
            assert store.user_for_token(token, "session") is None
        last.reload()  # the third browser finds itself signed out
        expect(last.locator("#signin")).to_be_visible()
    finally:
        for context in (first, second, third):
            context.close()
    assert not page_problems.unexpected(), page_problems.seen  # 401s once signed out are expected


COMPATIBLE_MODEL = "qwen2.5-coder:32b"
USAGE = {
    "turns": [
        {"turn": 1, "input_tokens": 1000, "output_tokens": 500},
        {"turn": 2, "input_tokens": 234, "output_tokens": 67},
    ],
    "total_tokens": 1801,
}
ESTIMATED = {  # a server that sent no usage: kiln counted (app.providers.openai_compatible)
    "turns": [{"turn": 1, "input_tokens": 2048, "output_tokens": 300, "estimated": True}],
    "total_tokens": 2348,
}


def _offer_compatible(route: Route) -> None:
    """``GET /api/me`` as a server with an OpenAI-compatible base URL set answers it."""
    response = route.fetch()
    route.fulfill(
        response=response, json={**response.json(), "available": ["openai-compatible", "replay"]}
    )


class RunUsages:
    """``GET /api/runs/{id}`` with ``usages[n]`` for the n-th run asked about."""

    def __init__(self, *usages: dict[str, Any]) -> None:
        self.usages = usages
        self.by_run: dict[str, dict[str, Any]] = {}

    def __call__(self, route: Route) -> None:
        response = route.fetch()
        run = response.json()
        if run["id"] not in self.by_run:  # the page asks about a run more than once
            self.by_run[run["id"]] = self.usages[len(self.by_run)]
        route.fulfill(response=response, json={**run, "usage": self.by_run[run["id"]]})


def test_each_message_names_its_provider_and_model_and_the_footer_shows_tokens(
    page: Page, fake_service: FakeService
) -> None:
    fake_service.pace = 0.0
    page.route("**/api/me", _offer_compatible)
    page.route("**/api/runs/*", RunUsages(USAGE, ESTIMATED))  # the run, not /events or /cancel
    sign_in(page, f"{fake_base_url(fake_service)}/login?token={fake_service.login_token}")
    page.get_by_role("button", name="Settings").click()
    dialog = page.get_by_role("dialog", name="Provider settings")
    dialog.get_by_label("Provider").select_option("openai-compatible")
    expect(dialog.locator("#settings-key-note")).to_contain_text("need no key")
    dialog.get_by_label("Model").fill(COMPATIBLE_MODEL)
    dialog.get_by_role("button", name="Use this").click()
    expect(page.locator("#provider-badge")).to_have_text(
        f"OpenAI-compatible server · {COMPATIBLE_MODEL}"
    )
    expect(page.locator("#demo-notice")).to_be_hidden()

    with page.expect_request(_is_message_post) as first:
        send_message(page, "make me a todo app")
    # A new chat's first message comes with the chat itself (POST /api/chats {title, message}).
    assert first.value.post_data_json["message"] == {
        "content": "make me a todo app",
        "provider": "openai-compatible",
        "model": COMPATIBLE_MODEL,
    }
    footer = page.locator(".run-footer[data-state='completed']")
    expect(footer).to_contain_text("1,234 tokens in · 567 out")
    screenshot(page, "compatible-run-tokens")

    choose_demo(page, "todo-app")
    with page.expect_request(_is_message_post) as second:
        send_message(page, "now make it blue")
    assert second.value.post_data_json == {
        "content": "now make it blue",
        "provider": "replay",
        "model": "todo-app",
    }
    expect(footer.nth(1)).to_contain_text("≈2,048 tokens in · ≈300 out (estimated)")
    expect(footer.first).to_contain_text("1,234 tokens in · 567 out")
    page.unroute_all(behavior="ignoreErrors")  # no handler may run while the page closes


def _is_message_post(request: Request) -> bool:
    """A message sent: to a chat, or with a new chat."""
    return request.method == "POST" and request.url.endswith(("/messages", "/api/chats"))


def test_the_openai_compatible_server_says_what_is_missing(
    page: Page, fake_service: FakeService
) -> None:
    """Chosen without a model name, the badge names the server's default model (it read
    "· undefined"); chosen while the server has no base URL, the banner says that, not "add a
    key" (a key would not help)."""
    page.route("**/api/me", _offer_compatible)
    sign_in(page, f"{fake_base_url(fake_service)}/login?token={fake_service.login_token}")
    page.get_by_role("button", name="Settings").click()
    dialog = page.get_by_role("dialog", name="Provider settings")
    dialog.get_by_label("Provider").select_option("openai-compatible")
    dialog.get_by_label("Model").fill("")
    dialog.get_by_role("button", name="Use this").click()
    badge = page.locator("#provider-badge")
    expect(badge).to_have_text("OpenAI-compatible server · server's default model")

    page.unroute_all(behavior="ignoreErrors")  # the server has no base URL after all
    page.reload()
    notice = page.locator("#demo-notice")
    expect(notice).to_contain_text("OpenAI-compatible server is not set up")
    expect(notice).to_contain_text("KILN_OPENAI_COMPATIBLE_BASE_URL")
    expect(notice).not_to_contain_text("Add a key")
    expect(badge).not_to_contain_text("undefined")
