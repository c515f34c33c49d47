"""The Versions tab against a real ``kiln serve``: build the demo app, change it (a follow-up
adds a footer), open the versions, view the change's diff, download a zip and restore version 1
(which becomes a new version)."""

from __future__ import annotations

import io
import json
import re
import zipfile

from playwright.sync_api import Page, expect

from tests.web.conftest import RUN_LIMIT_MS, screenshot
from tests.web.kiln_service import FOOTER, FOOTER_RECORDING
from tests.web.recording import send_message

COMPLETED = ".run-footer[data-state='completed']"


def choose_recording(page: Page, name: str) -> None:
    """Make later messages replay recording ``name`` (the page reads its choice on load)."""
    choice = json.dumps({"provider": "replay", "model": name})
    page.evaluate("choice => localStorage.setItem('kiln.choice', choice)", choice)
    page.reload()
    page.locator("#app").wait_for(state="visible")


def test_build_change_diff_download_and_restore(kiln_page: Page) -> None:
    page = kiln_page
    send_message(page, "make me a todo app")
    page.locator(COMPLETED).wait_for(timeout=RUN_LIMIT_MS)
    choose_recording(page, FOOTER_RECORDING)
    expect(page.locator(COMPLETED)).to_have_count(1)
    send_message(page, "add a footer")
    expect(page.locator(COMPLETED)).to_have_count(2, timeout=RUN_LIMIT_MS)

    page.get_by_role("tab", name="Versions").click()
    rows = page.locator("#versions-list .version")
    newest = rows.first
    expect(newest.locator(".version-meta")).to_contain_text("1 added, 0 changed, 0 removed")
    count = rows.count()
    assert count >= 2
    expect(newest.locator(".version-title")).to_have_text(f"Version {count} · turn 1")

    newest.get_by_role("button", name=f"Show the changes of version {count}").click()
    expect(page.locator("#diff-title")).to_contain_text(f"Changes of version {count}")
    expect(page.locator("#diff-view .diff-file")).to_have_text(["# src/Footer.jsx (added)"])
    added = page.locator("#diff-view .diff-add").all_text_contents()
    assert "".join(line[1:] for line in added) == FOOTER
    screenshot(page, "versions-diff")

    with page.expect_download() as download:
        newest.get_by_role("link", name=f"Download version {count} as a zip").click()
    assert re.fullmatch(rf"[0-9a-f]+-v{count}\.zip", download.value.suggested_filename)
    with zipfile.ZipFile(io.BytesIO(download.value.path().read_bytes())) as archive:
        assert archive.read("src/Footer.jsx").decode() == FOOTER

    rows.last.get_by_role("button", name="Restore version 1").click()
    expect(page.locator("#versions-status")).to_have_text(
        f"Version 1 restored as version {count + 1}."
    )
    expect(rows).to_have_count(count + 1)
    expect(rows.first.locator(".version-title")).to_have_text(
        f"Version {count + 1} · restored version 1"
    )
    expect(page.get_by_role("tab", name="Versions")).to_contain_text(str(count + 1))
    screenshot(page, "versions-restored")
