"""Cards of a run that ends early, against the stand-in service: a cancel closes every card
still waiting or running (an install card stayed "running…" forever), and a run another worker
took over says where attempt 2 began, live and after a reload; a replayed answer says its install
was skipped and that it changed nothing; the checks card says what the render check found."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.web.conftest import fake_base_url, screenshot, sign_in
from tests.web.fake_service import FakeService
from tests.web.recording import send_message

INSTALL_UNDER_WAY = [
    {"type": "install_content", "dependencies": ["zustand"], "framework": None},
    {"type": "install_started", "packages": ["zustand"]},
    {"type": "output", "line": "added 1 package"},
    {"type": "command", "command": "npm", "args": ["run", "build"]},  # queued behind it
]


def test_a_cancel_closes_every_open_card(page: Page, fake_service: FakeService) -> None:
    fake_service.prelude = INSTALL_UNDER_WAY
    fake_service.pace = 0.5  # the recording goes on slowly until the cancel
    sign_in(page, f"{fake_base_url(fake_service)}/login?token={fake_service.login_token}")
    send_message(page, "make me a todo app")
    install = page.locator(".card.step.install")
    expect(install.locator(".card-status")).to_have_text("running…")
    page.get_by_role("button", name="Cancel").click()
    page.locator(".run-footer[data-state='cancelled']").wait_for()
    expect(install).to_have_attribute("data-state", "stopped")
    expect(install.locator(".card-status")).to_have_text("cancelled")
    command = page.locator(".card.step.command").first
    expect(command.locator(".card-status")).to_have_text("cancelled")
    expect(page.locator(".card[data-state='running'], .card[data-state='queued']")).to_have_count(0)
    screenshot(page, "cancelled-cards-closed")
    page.reload()
    page.locator(".run-footer[data-state='cancelled']").wait_for()
    expect(page.locator(".card.step.install .card-status")).to_have_text("cancelled")


def test_a_run_taken_over_by_another_worker_says_so(page: Page, fake_service: FakeService) -> None:
    restarted = {"type": "run_started", "attempt": 2, "resumed": False}
    fake_service.prelude = [*INSTALL_UNDER_WAY, restarted]
    sign_in(page, f"{fake_base_url(fake_service)}/login?token={fake_service.login_token}")
    send_message(page, "make me a todo app")
    page.locator(".run-footer[data-state='completed']").wait_for()
    notice = page.get_by_role("note")
    expect(notice).to_have_text("The worker restarted; the run started over.")
    first_install = page.locator(".card.step.install").first
    expect(first_install.locator(".card-status")).to_have_text("interrupted")
    screenshot(page, "run-restarted")
    page.reload()
    page.locator(".run-footer[data-state='completed']").wait_for()
    expect(page.get_by_role("note")).to_have_text("The worker restarted; the run started over.")


def test_a_replayed_answer_says_it_installed_and_changed_nothing(
    page: Page, fake_service: FakeService
) -> None:
    fake_service.replayed = True
    sign_in(page, f"{fake_base_url(fake_service)}/login?token={fake_service.login_token}")
    send_message(page, "now make it blue")
    footer = page.locator(".run-footer[data-state='completed']")
    expect(footer).to_have_text("No changes: the answer wrote the same files again")
    expect(page.locator(".card.step.install .card-status")).to_have_text("already installed")
    screenshot(page, "replayed-no-changes")
    page.reload()
    expect(footer).to_have_text("No changes: the answer wrote the same files again")


THROWS = {
    "kind": "uncaught",
    "message": "Cannot read properties of undefined (reading 'name')",
    "stack": "",
    "source": {"file": "src/App.jsx", "line": 12, "column": 5},
    "url": "http://x.preview.localhost/",
    "count": 2,
}
RENDER_CASES = [
    pytest.param(
        {"ok": False, "skipped": None, "errors": [THROWS], "blank": False},
        "Checks: build passed, app throws 1 error",
        ["Cannot read properties of undefined (reading 'name') (2 times)", "src/App.jsx:12:5"],
        id="throws",
    ),
    pytest.param(
        {"ok": False, "skipped": None, "errors": [], "blank": True},
        "Checks: build passed, page blank",
        ["The page stayed blank"],
        id="blank",
    ),
    pytest.param(
        {
            "ok": True,
            "skipped": "render_check_disabled",
            "message": "KILN_RENDER_CHECK is off",
            "errors": [],
            "blank": False,
        },
        "Checks: build passed, render check skipped",
        [],
        id="skipped",
    ),
    pytest.param(
        {"ok": True, "skipped": None, "errors": [], "blank": False},
        "Checks: build passed, app renders",
        [],
        id="renders",
    ),
]


@pytest.mark.parametrize(("render", "title", "details"), RENDER_CASES)
def test_the_checks_card_says_what_the_render_check_found(
    page: Page, fake_service: FakeService, render: dict[str, Any], title: str, details: list[str]
) -> None:
    """A run whose app throws does not say "build passed" alone; the run's ``preview_error``
    events show in a card of their own."""
    fake_service.render = {**render, "seconds": 1.5, "screenshot": None}
    fake_service.run_preview_errors = [THROWS] if render["errors"] else []
    sign_in(page, f"{fake_base_url(fake_service)}/login?token={fake_service.login_token}")
    send_message(page, "make me a todo app")
    page.locator(".run-footer[data-state='completed']").wait_for(timeout=60_000)
    card = page.locator(".card.checks")
    expect(card.locator(".card-title")).to_have_text(title)
    ok = not details
    expect(card).to_have_attribute("data-state", "ok" if ok else "failed")
    for text in details:
        expect(card.locator("details.render")).to_contain_text(text)
    if render.get("skipped"):
        words = "The render check is turned off: KILN_RENDER_CHECK is off"
        expect(card.locator(".render-skipped")).to_have_text(words)
    thrown = page.locator(".card.preview-errors")
    expect(thrown).to_have_count(1 if render["errors"] else 0)
    if render["errors"]:
        expect(thrown).to_contain_text("The app threw an error in the browser")
        expect(thrown).to_contain_text("src/App.jsx:12:5")
        screenshot(page, f"checks-render-{card.get_attribute('data-state')}")
    page.reload()
    expect(page.locator(".card.checks .card-title")).to_have_text(title)
