"""Publishing in a real Chromium against a real ``kiln serve`` (issue 27's "Done means"): build
the demo, publish it from the Versions tab, open the link in a new browser context without
cookies (the app works), publish a later version (the same link serves it), unpublish (404).
In the person's own signed-in browser, the published origin cannot read kiln's cookie nor
call kiln's API with their session."""

from __future__ import annotations

import re
import secrets
from urllib.parse import urlsplit

import httpx
from playwright.sync_api import Browser, Page, Route, expect

from tests.web.conftest import RUN_LIMIT_MS, desktop_context, screenshot
from tests.web.kiln_service import RETITLE_RECORDING, RETITLED, KilnService
from tests.web.recording import send_message
from tests.web.test_versions import choose_recording

COMPLETED = ".run-footer[data-state='completed']"
APP_URL = re.compile(r"http://[a-z2-7]{16}\.apps\.kiln\.localhost:\d+/")
# A page of another origin asks kiln's API with the person's cookie: the browser's answer.
READ_KILN = """async (api) => {
  try {
    const answer = await fetch(api + "/api/me", { credentials: "include" });
    return "read " + answer.status;
  } catch {
    return "refused";
  }
}"""
# A "simple" POST (no preflight) that would make a chat; its answer is opaque to the page (and
# Chromium's opaque-response blocking may fail the fetch): what kiln did is checked apart.
SEND_TO_KILN = """(api) => fetch(api + "/api/chats", {
  method: "POST", credentials: "include", mode: "no-cors",
  headers: { "Content-Type": "text/plain" }, body: "{}",
}).then(() => "answered", () => "blocked")"""
COUNT_CHATS = "async () => (await (await fetch('/api/chats')).json()).chats.length"


def without_content_policy(route: Route) -> None:
    """Answer with the published file as kiln serves it, minus its content security policy
    (fetched on loopback by its host name: Playwright's own fetch cannot resolve it)."""
    parts = urlsplit(route.request.url)
    answer = httpx.get(
        f"http://127.0.0.1:{parts.port}{parts.path}", headers={"host": parts.netloc}, timeout=30
    )
    dropped = {"content-security-policy", "content-length", "content-encoding"}
    headers = {k: v for k, v in answer.headers.items() if k not in dropped}
    route.fulfill(status=answer.status_code, headers=headers, body=answer.content)


def publish_newest(page: Page, *, reload_while_building: bool = False) -> int:
    """Publish the newest version from the Versions tab (reloading the page while it builds:
    the job goes on, and the panel picks its progress up again); its number once it is live."""
    page.get_by_role("tab", name="Versions").click()
    rows = page.locator("#versions-list .version")
    expect(rows.first).to_be_visible()
    newest = rows.count()
    rows.first.get_by_role("button", name=f"Publish version {newest}").click()
    progress = page.locator(".publish-progress")
    expect(progress).to_contain_text(f"Publishing version {newest}: ")
    if reload_while_building:
        expect(progress).to_have_attribute("data-stage", re.compile("building|storing"))
        page.reload()
        page.get_by_role("tab", name="Versions").click()
        # Only the job's own stream moves the panel to live after a reload (this page never
        # asked to publish): without picking the job up again, it stays "Not published".
    expect(page.locator(".publication-state")).to_have_text(
        f"Published: version {newest}", timeout=RUN_LIMIT_MS
    )
    if not reload_while_building:  # a reloaded page may have found the job live at its load
        expect(page.locator("#versions-status")).to_have_text(f"Version {newest} is published.")
    expect(progress).to_have_count(0)
    expect(rows.first.locator(".version-live")).to_have_text("live")
    return newest


def test_publish_open_without_cookies_publish_again_and_unpublish(
    kiln_page: Page, browser: Browser, kiln: KilnService
) -> None:
    page = kiln_page
    send_message(page, "make me a todo app")
    page.locator(COMPLETED).wait_for(timeout=RUN_LIMIT_MS)
    first = publish_newest(page, reload_while_building=True)
    url = page.locator(".publication-link").get_attribute("href")
    assert url is not None
    assert APP_URL.fullmatch(url), url
    screenshot(page, "publish-live")

    visitor = desktop_context(browser)  # nobody's: no cookies, no sign-in
    try:
        app = visitor.new_page()
        app.goto(url)
        app.get_by_role("heading", name="Todos").wait_for()
        title = f"Tell a friend {secrets.token_hex(3)}"
        app.get_by_label("Todo title").fill(title)
        app.get_by_role("button", name="Add").click()
        expect(app.get_by_text(title)).to_be_visible()
        assert visitor.cookies() == []  # the app's host sets none
        screenshot(app, "publish-visitor")

        own = page.context.new_page()  # the person's browser, signed in to kiln
        # The app's policy already stops its scripts talking to an http kiln (connect-src is
        # 'self' and https:); lifted here, as on an https deployment, kiln must refuse itself.
        own.route(url + "**", without_content_policy)
        own.goto(url)
        own.get_by_role("heading", name="Todos").wait_for()
        assert own.evaluate("document.cookie") == ""
        assert own.evaluate(READ_KILN, kiln.base_url) == "refused"
        chats = page.evaluate(COUNT_CHATS)
        answers: list[int] = []
        own.on("response", lambda answer: answers.append(answer.status))
        own.evaluate(SEND_TO_KILN, kiln.base_url)
        assert page.evaluate(COUNT_CHATS) == chats  # kiln made nothing for it
        # Whatever reached kiln was refused (Chromium may also stop it first: no answer then).
        assert set(answers) <= {403}, answers
        own.close()

        choose_recording(page, RETITLE_RECORDING)
        send_message(page, "give it a title")
        expect(page.locator(COMPLETED)).to_have_count(2, timeout=RUN_LIMIT_MS)
        later = publish_newest(page)
        assert later > first
        assert page.locator(".publication-link").get_attribute("href") == url
        app.reload()
        expect(app).to_have_title(RETITLED)
        expect(app.get_by_role("heading", name="Todos")).to_be_visible()

        page.get_by_role("button", name="Unpublish the app").click()
        expect(page.locator("#versions-status")).to_contain_text("Unpublished")
        expect(page.locator(".publication-state")).to_contain_text("Not published")
        answer = app.goto(url)
        assert answer is not None
        assert answer.status == 404
        expect(app.get_by_role("heading")).to_have_text("Nothing is published here")
    finally:
        visitor.close()
