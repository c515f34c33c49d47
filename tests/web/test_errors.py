"""Errors are shown in words a person understands, never as raw tracebacks (stand-in service,
which fails a run on demand and puts a stack trace in the run's ``error``)."""

from __future__ import annotations

import re

from playwright.sync_api import Page, Route, expect

from app.error_codes import BY_CODE
from tests.web.conftest import PageProblems, fake_base_url, screenshot, sign_in
from tests.web.fake_service import FakeService
from tests.web.recording import send_message

REFUSED = "anthropic refused the API key (401): check the key in Settings"


def test_a_failed_run_explains_itself_without_a_traceback(
    page: Page, fake_service: FakeService
) -> None:
    fake_service.failure = ("provider_auth", REFUSED)
    sign_in(page, f"{fake_base_url(fake_service)}/login?token={fake_service.login_token}")
    send_message(page, "make me a todo app")
    footer = page.locator(".run-footer[data-state='failed']")
    footer.wait_for()
    problem = page.locator(".card.problem.fatal")
    expect(problem).to_contain_text("The AI provider refused the API key")
    expect(problem).to_contain_text(REFUSED)
    expect(footer).to_contain_text("Failed")
    assert "Traceback" not in page.locator("body").inner_text()
    screenshot(page, "fake-failed-run")


def test_every_declared_code_has_its_title_in_the_page(
    page: Page, fake_service: FakeService
) -> None:
    """The titles come from app/error_codes.py (through the generated vocabulary.js): a code the
    hand-written table lacked (``deadline_exceeded``) reads as its words, not "went wrong"."""
    fake_service.failure = ("deadline_exceeded", "the run took longer than 1800 s")
    sign_in(page, f"{fake_base_url(fake_service)}/login?token={fake_service.login_token}")
    send_message(page, "make me a todo app")
    problem = page.locator(".card.problem.fatal")
    expect(problem).to_contain_text(BY_CODE["deadline_exceeded"].title)
    titles = page.evaluate("import('/static/vocabulary.js').then((m) => m.ERROR_TITLES)")
    assert titles == {code: error.title for code, error in BY_CODE.items()}


def test_a_malformed_sign_in_link_is_refused_in_words(
    page: Page, fake_service: FakeService
) -> None:
    page.goto(f"{fake_base_url(fake_service)}/")
    link = page.get_by_label("Sign-in link")
    expect(link).to_be_focused()
    link.fill("not a link")
    link.press("Enter")
    expect(page.get_by_role("alert")).to_contain_text("does not look like a kiln sign-in link")


def test_a_page_whose_scripts_fail_to_load_reloads_a_few_times_then_says_so(
    page: Page, fake_service: FakeService, page_problems: PageProblems
) -> None:
    page_problems.allow.append(re.compile(r"net::ERR_INTERNET_DISCONNECTED"))
    module = "**/static/files.js"
    page.route(module, lambda route: route.abort("internetdisconnected"))
    page.goto(f"{fake_base_url(fake_service)}/")
    # The message only comes after the automatic reloads failed too (0.5 + 1 + 2 s of waiting).
    expect(page.get_by_role("alert")).to_contain_text("kiln could not load its page", timeout=15000)
    assert page.evaluate("sessionStorage.getItem('kiln.reloads')") == "3"
    page.unroute(module)
    page.reload()
    expect(page.get_by_label("Sign-in link")).to_be_visible()
    expect(page.get_by_text("kiln could not load its page")).to_be_hidden()


def test_a_page_whose_scripts_fail_twice_opens_on_a_later_reload(
    page: Page, fake_service: FakeService, page_problems: PageProblems
) -> None:
    """A sandbox starting on the same host drops Chromium's requests more than once in a row."""
    page_problems.allow.append(re.compile(r"net::ERR_FAILED"))
    failures = [2]

    def flaky(route: Route) -> None:
        if failures[0]:
            failures[0] -= 1
            route.abort("failed")
        else:
            route.continue_()

    page.route("**/static/files.js", flaky)
    page.goto(f"{fake_base_url(fake_service)}/")
    expect(page.get_by_label("Sign-in link")).to_be_visible(timeout=15000)
    expect(page.get_by_text("kiln could not load its page")).to_be_hidden()
    assert page.evaluate("sessionStorage.getItem('kiln.reloads')") is None
