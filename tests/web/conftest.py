"""Fixtures of the browser tests: Debian's Chromium driven by Playwright, the service under test,
and screenshots.

The browser is ``/usr/bin/chromium`` (never a Playwright-downloaded one). Each test gets a fresh
browser context (cookies, storage) at 1280x800; ``signed_in`` opens the one-time login link of
the server it is given. Console errors and uncaught page errors fail the test, except the ones
a test expects (``page_problems.allow``). Screenshots go to ``artifacts/screenshots/``, which CI
keeps.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import (
    Browser,
    BrowserContext,
    ConsoleMessage,
    Error,
    Page,
    StorageState,
    ViewportSize,
    expect,
    sync_playwright,
)
from playwright.sync_api import (
    TimeoutError as PlaywrightTimeoutError,
)

from tests.servers import UvicornThread, loopback_socket
from tests.web.fake_service import FakeService, build_app
from tests.web.kiln_service import KilnService, start_kiln
from tests.web.recording import send_message

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"
DESKTOP: ViewportSize = {"width": 1280, "height": 800}
MOBILE: ViewportSize = {"width": 390, "height": 800}
DEMO_RECORDING = "todo-app"
WEB_REDIS_DB = 9  # others: sandbox 0, api 3, end-to-end 4, runs 7
RUN_LIMIT_MS = 240_000  # a whole demo run: replay, install, build (generous: CI is slower)
# Assertions wait this long by default (Playwright's own 5 s is tight for a loaded CI box).
expect.set_options(timeout=20_000)
# What a page may log without failing the test: the 401 of /api/me before signing in, and
# ERR_NETWORK_CHANGED: Docker creating a sandbox's network on this host makes Chromium drop the
# requests in flight; the page retries (GETs, the event stream) or reloads (its scripts).
EXPECTED_CONSOLE = (re.compile(r"status of 401"), re.compile(r"net::ERR_NETWORK_CHANGED"))


@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    """One headless Chromium for the web tests. Package, not session: Playwright's sync API
    runs an event loop in this thread while it lives, so an async test after it (in the same
    process of ``make test``'s two) could not start its own; it ends with ``tests/web``."""
    if not CHROMIUM.is_file():
        pytest.fail(f"{str(CHROMIUM)!r} is missing: install Debian's chromium package")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        yield launched
        launched.close()


# A module that fails to link (an HMR update of a half-written file: "The requested module
# '/src/App.jsx?t=...' does not provide an export named 'default'") throws with an empty stack,
# so only its message tells whose it is: Vite serves the app's modules under /src/, /@fs/ and
# /node_modules/.vite/, with ?t= on HMR updates; kiln's own scripts are none of these.
PREVIEW_MODULE = re.compile(r"'(/src/|/@fs/|/node_modules/\.vite/|[^']*\?t=\d)")


def is_preview_error(message: str, stack: str) -> bool:
    """Whether an uncaught error came from the preview's app rather than kiln's own page."""
    if stack:
        return ".preview." in stack
    return PREVIEW_MODULE.search(message) is not None


@dataclass
class PageProblems:
    """Console errors and page errors seen during a test."""

    seen: list[str] = field(default_factory=list)
    allow: list[re.Pattern[str]] = field(default_factory=lambda: list(EXPECTED_CONSOLE))

    def console(self, message: ConsoleMessage) -> None:
        """Record a console error of kiln's own page (the preview's app is not kiln's)."""
        if message.type == "error" and ".preview." not in message.location.get("url", ""):
            self.seen.append(f"console: {message.text} ({message.location.get('url')})")

    def page_error(self, error: Error) -> None:
        """Record an uncaught exception of kiln's own page (the preview's app is not kiln's:
        while its files are half written it may well throw)."""
        if not is_preview_error(error.message, error.stack or ""):
            self.seen.append(f"pageerror: {error}")

    def unexpected(self) -> list[str]:
        """What nothing in ``allow`` explains."""
        return [text for text in self.seen if not any(p.search(text) for p in self.allow)]


@pytest.fixture
def page_problems() -> PageProblems:
    """The problems the ``page`` fixture collects; a test may add to ``allow``."""
    return PageProblems()


def desktop_context(browser: Browser, **options: Any) -> BrowserContext:
    """A new browser context at desktop size that prefers reduced motion: the UI's spinner
    then stands still (headless Chromium composites in software, and a spinning spinner cost
    it 2.7 against 1.0 CPU-s per 15 s on a suite that is CPU-bound)."""
    return browser.new_context(viewport=DESKTOP, reduced_motion="reduce", **options)


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    """A fresh browser context (no cookies) at desktop size."""
    fresh = desktop_context(browser)
    fresh.set_default_timeout(15_000)
    yield fresh
    fresh.close()


@pytest.fixture
def page(context: BrowserContext, page_problems: PageProblems) -> Iterator[Page]:
    """A page that fails the test on console errors and uncaught exceptions."""
    opened = context.new_page()
    opened.on("console", page_problems.console)
    opened.on("pageerror", page_problems.page_error)
    yield opened
    problems = page_problems.unexpected()
    assert not problems, f"the page reported problems: {problems}"


def screenshot(page: Page, name: str) -> Path:
    """Save a screenshot of ``page`` as ``artifacts/screenshots/<name>.png``."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path


def sign_in(page: Page, login_url: str) -> None:
    """Open the one-time login link and wait for the app to show."""
    page.goto(login_url)
    page.locator("#app").wait_for(state="visible")


@pytest.fixture
def fake_service() -> Iterator[FakeService]:
    """The contract-speaking stand-in service (see ``fake_service``) on a loopback port."""
    sock = loopback_socket()
    service = FakeService(port=sock.getsockname()[1])
    with UvicornThread(build_app(service), sock):
        yield service


def fake_base_url(service: FakeService) -> str:
    """The fake service's UI URL (``localhost`` so its preview hosts are same-site)."""
    return f"http://localhost:{service.port}"


@pytest.fixture(scope="package")
def kiln(tmp_path_factory: pytest.TempPathFactory, redis_url: str) -> Iterator[KilnService]:
    """A real ``kiln serve`` (fresh data dir, its own database of the session's private Redis)
    for the session."""
    web_redis_url = redis_url.rsplit("/", 1)[0] + f"/{WEB_REDIS_DB}"
    service = start_kiln(tmp_path_factory.mktemp("kiln-serve"), web_redis_url)
    yield service
    service.stop()


@pytest.fixture(scope="package")
def kiln_state(browser: Browser, kiln: KilnService) -> StorageState:
    """The signed-in browser state (the login link works once, so it is used once)."""
    context = desktop_context(browser)
    try:
        page = context.new_page()
        sign_in(page, kiln.login_url)
        state = context.storage_state()
    finally:
        context.close()
    # Pin the demo: a test that stores a provider key must not turn later runs into real calls.
    choice = json.dumps({"provider": "replay", "model": DEMO_RECORDING})
    state["origins"] = [
        {"origin": kiln.base_url, "localStorage": [{"name": "kiln.choice", "value": choice}]}
    ]
    return state


@pytest.fixture
def kiln_page(
    browser: Browser, kiln: KilnService, kiln_state: StorageState, page_problems: PageProblems
) -> Iterator[Page]:
    """A signed-in page on the real service's UI, at desktop size."""
    context = desktop_context(browser, storage_state=kiln_state)
    context.set_default_timeout(30_000)
    opened = context.new_page()
    opened.on("console", page_problems.console)
    opened.on("pageerror", page_problems.page_error)
    opened.goto(f"{kiln.base_url}/")
    try:
        opened.locator("#app").wait_for(state="visible")
    except PlaywrightTimeoutError:
        shown = opened.locator("body").inner_text()
        pytest.fail(f"the UI did not open: {shown!r}; page problems: {page_problems.seen}")
    yield opened
    context.close()
    problems = page_problems.unexpected()
    assert not problems, f"the page reported problems: {problems}"


@pytest.fixture(scope="package")
def demo_chat(browser: Browser, kiln: KilnService, kiln_state: StorageState) -> str:
    """The URL of a chat whose demo run has finished (built once, for the tests that look at
    its files and preview)."""
    context = desktop_context(browser, storage_state=kiln_state)
    try:
        page = context.new_page()
        page.goto(f"{kiln.base_url}/")
        send_message(page, "make me a todo app")
        page.locator(".run-footer[data-state='completed']").wait_for(timeout=RUN_LIMIT_MS)
        return page.url
    finally:
        context.close()
