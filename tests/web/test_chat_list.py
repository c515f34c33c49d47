"""Renaming and deleting chats in the sidebar, against the stand-in service: a title is edited
in place (Enter saves, Escape keeps the old one); a delete asks first, and a chat with a run in
progress is refused in words until the run has ended. Against a real ``kiln serve``: a built
chat's delete removes its sandbox's Docker objects and its project."""

from __future__ import annotations

import re

import docker
import pytest
from playwright.sync_api import Page, expect

from sandbox.settings import LABEL
from tests.web.conftest import RUN_LIMIT_MS, PageProblems, fake_base_url, screenshot, sign_in
from tests.web.fake_service import FakeService
from tests.web.kiln_service import KilnService
from tests.web.recording import page_fetch, send_message


def _chat_with_a_finished_run(page: Page, service: FakeService, text: str) -> None:
    sign_in(page, f"{fake_base_url(service)}/login?token={service.login_token}")
    send_message(page, text)
    page.locator(".run-footer[data-state='completed']").wait_for()


def test_a_chat_is_renamed_in_place(page: Page, fake_service: FakeService) -> None:
    _chat_with_a_finished_run(page, fake_service, "make me a todo app")
    page.get_by_role("button", name="Rename chat “make me a todo app”").click()
    title = page.get_by_label("Chat title")
    expect(title).to_be_focused()
    title.fill("Throwaway")
    title.press("Escape")
    expect(page.locator("#chat-list .chat-title")).to_have_text(["make me a todo app"])
    page.get_by_role("button", name="Rename chat “make me a todo app”").click()
    page.get_by_label("Chat title").fill("Todo list")
    page.get_by_label("Chat title").press("Enter")
    expect(page.locator("#chat-list .chat-title")).to_have_text(["Todo list"])
    expect(page).to_have_title("Todo list · kiln")
    assert [chat["title"] for chat in fake_service.chats.values()] == ["Todo list"]
    page.reload()
    expect(page.locator("#chat-list .chat-title")).to_have_text(["Todo list"])


def test_a_chat_is_deleted_after_a_confirm(page: Page, fake_service: FakeService) -> None:
    _chat_with_a_finished_run(page, fake_service, "make me a todo app")
    delete = page.get_by_role("button", name="Delete chat “make me a todo app”")
    delete.click()
    dialog = page.get_by_role("dialog", name="Delete chat")
    expect(dialog).to_contain_text("Its app, files, versions and messages are removed")
    screenshot(page, "chat-delete-confirm")
    dialog.get_by_role("button", name="Keep it").click()
    expect(dialog).to_be_hidden()
    assert len(fake_service.chats) == 1
    delete.click()
    dialog.get_by_role("button", name="Delete").click()
    expect(dialog).to_be_hidden()
    expect(page.locator("#chat-list")).to_have_text("No chats yet.")
    expect(page.locator(".msg.user")).to_have_count(0)
    assert fake_service.chats == {}
    assert "#/chats/" not in page.url


def test_a_chat_with_a_run_in_progress_is_not_deleted(
    page: Page, fake_service: FakeService, page_problems: PageProblems
) -> None:
    page_problems.allow.append(re.compile(r"status of 409"))
    fake_service.pace = 0.5  # the run goes on while the test deletes
    sign_in(page, f"{fake_base_url(fake_service)}/login?token={fake_service.login_token}")
    send_message(page, "slow one")
    page.locator(".run-footer[data-state='running']").wait_for()
    page.get_by_role("button", name="Delete chat “slow one”").click()
    dialog = page.get_by_role("dialog", name="Delete chat")
    dialog.get_by_role("button", name="Delete").click()
    expect(dialog.get_by_role("status")).to_contain_text("has a run in progress")
    expect(dialog.get_by_role("button", name="Delete")).to_be_disabled()
    dialog.get_by_role("button", name="Keep it").click()
    assert len(fake_service.chats) == 1
    page.get_by_role("button", name="Cancel").click()
    page.locator(".run-footer[data-state='cancelled']").wait_for()
    page.get_by_role("button", name="Delete chat “slow one”").click()
    dialog.get_by_role("button", name="Delete").click()
    expect(page.locator("#chat-list")).to_have_text("No chats yet.")


@pytest.mark.npm
def test_deleting_a_built_chat_removes_its_sandbox_and_project(
    kiln_page: Page, kiln: KilnService, page_problems: PageProblems
) -> None:
    page_problems.allow.append(re.compile(r"status of 404 .*/api/chats/"))  # asked once gone
    page, text = kiln_page, "a todo app, to be deleted"
    send_message(page, text)
    page.locator(".run-footer[data-state='completed']").wait_for(timeout=RUN_LIMIT_MS)
    chat_id = page.url.split("#/chats/", 1)[1]
    shown = page_fetch(page, f"/api/chats/{chat_id}").json()
    sandbox_id = shown["chat"]["sandbox_id"] or shown["runs"][-1]["sandbox_id"]
    project = kiln.log.parent / "data" / "projects" / chat_id
    assert sandbox_id, shown
    assert project.is_dir(), "the run recorded no project version"
    page.get_by_role("button", name=f"Delete chat “{text}”").click()
    page.get_by_role("dialog", name="Delete chat").get_by_role("button", name="Delete").click()
    expect(page.locator("#chat-list .chat-link", has_text=text)).to_have_count(0)
    client = docker.from_env()
    try:
        label = {"label": f"{LABEL}={sandbox_id}"}
        left = [
            c.name for c in client.containers.list(all=True, filters=label, ignore_removed=True)
        ]
        left += [v.name for v in client.volumes.list(filters=label)]
    finally:
        client.close()
    assert left == [], f"sandbox {sandbox_id!r} left Docker objects behind"
    assert not project.exists()
    assert page_fetch(page, f"/api/chats/{chat_id}").status == 404
