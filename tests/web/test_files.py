"""The file tree and code view against a real ``kiln serve``: every file of the demo recording
is listed (with the template's own files from the sandbox's workspace), a file opens in a
highlighted read-only view, and a template file no event named is fetched from the sandbox."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.web.conftest import screenshot
from tests.web.recording import DEMO_FILES, demo_files, tree_paths


def test_the_tree_lists_every_file_and_opens_them(kiln_page: Page, demo_chat: str) -> None:
    page = kiln_page
    page.goto(demo_chat)
    page.locator(".run-footer[data-state='completed']").wait_for()
    page.get_by_role("tab", name="Files").click()
    expect(page.locator("#file-tree button[data-path='package.json']")).to_be_attached()
    assert tree_paths(page) >= {*DEMO_FILES, "package.json"}

    page.locator("#file-tree button[data-path='src/App.jsx']").click()
    expect(page.locator("#code-path")).to_have_text("src/App.jsx")
    assert page.locator("#code-view").text_content() == demo_files()["src/App.jsx"]
    expect(page.locator("#code-view .tok-kw").first).to_be_visible()  # highlighted
    screenshot(page, "files-app-jsx")

    page.locator("#file-tree button[data-path='package.json']").click()
    expect(page.locator("#code-view")).to_contain_text('"zustand"')  # merged by the install
