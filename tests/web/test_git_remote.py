"""Git out and in from the page, against a real ``kiln serve`` and a real git http-backend:
the sidebar's "Import from git" makes a chat of a Vite + React repository whose preview shows
its app; the Versions tab's "Push to git" pushes that chat (with a token) to another
repository, and says so; a wrong token is said in words."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, Route, expect

from tests.projects.git_http import GitServer, basic_auth, git, git_server
from tests.web.conftest import RUN_LIMIT_MS, PageProblems, screenshot

TOKEN = "web-git-token-0123456789"
TEMPLATE = Path(__file__).resolve().parents[2] / "images" / "vite-react" / "workspace"
APP = "export default function App() {\n  return <h1>Imported from git</h1>;\n}\n"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[GitServer]:
    root = tmp_path / "served"
    root.mkdir()
    with git_server(root, token=TOKEN) as running:
        running.bare("source")
        running.bare("target")
        work = tmp_path / "work"
        git(tmp_path, "init", "--quiet", "--initial-branch=main", str(work))
        for path in TEMPLATE.rglob("*"):
            if path.is_file():
                (work / path.relative_to(TEMPLATE)).parent.mkdir(parents=True, exist_ok=True)
                (work / path.relative_to(TEMPLATE)).write_bytes(path.read_bytes())
        (work / "src" / "App.jsx").write_text(APP)
        git(work, "add", "-A")
        git(work, "commit", "--quiet", "-m", "an app")
        git(work, "-c", basic_auth(TOKEN), "push", "--quiet",
            running.url("source"), "main")  # fmt: skip
        yield running


def test_import_then_push_from_the_page(
    kiln_page: Page, server: GitServer, page_problems: PageProblems
) -> None:
    page = kiln_page
    page_problems.allow.append(re.compile(r"status of 422 .*/push\)"))  # the wrong token's
    page.get_by_text("Import from git").click()
    page.get_by_label("Repository URL").first.fill(server.url("source"))
    page.locator("#import-token").fill(TOKEN)
    page.get_by_role("button", name="Import").click()
    expect(page.locator("#import-status")).to_contain_text(
        "Imported as a vite-react app", timeout=RUN_LIMIT_MS
    )
    heading = page.frame_locator("#preview-frame").get_by_role("heading", name="Imported from git")
    heading.wait_for(timeout=RUN_LIMIT_MS)
    screenshot(page, "git-imported")

    page.get_by_role("tab", name="Versions").click()
    expect(page.locator("#versions-list .version-title")).to_have_text(
        [f"Version 1 · imported from {server.url('source')}"]
    )
    page.get_by_text("Push to git").click()
    page.locator("#remote-url").fill(server.url("target"))
    page.locator("#remote-token").fill("not-the-token")
    # After the refusal the form reads the remote again (the kept last push); on a loaded host
    # that read lands after the next token is typed, which must survive it.
    held: list[Route] = []
    page.route("**/api/chats/*/remote", lambda route: _hold_reads(route, held))
    page.locator("#remote-push").click()
    expect(page.locator("#remote-status")).to_contain_text("refused the credentials")
    _wait_held(page, held)
    page.locator("#remote-token").fill(TOKEN)
    for route in held:
        route.continue_()
    page.unroute("**/api/chats/*/remote")
    expect(page.locator("#remote-status")).to_contain_text("Last push failed")
    expect(page.locator("#remote-token")).to_have_value(TOKEN)
    page.locator("#remote-push").click()
    expect(page.locator("#remote-status")).to_contain_text("Version 1 pushed at")
    expect(page.locator("#remote-token")).to_have_value("")
    expect(page.locator("#remote-token")).to_have_attribute(
        "placeholder", "a token is stored (type to replace)"
    )
    assert TOKEN not in page.content()
    screenshot(page, "git-pushed")
    target = server.root / "target.git"
    assert git(target, "show", "main:src/App.jsx") == APP


def _hold_reads(route: Route, held: list[Route]) -> None:
    """Hold the form's reads of the remote (GET) until the test lets them go; the rest pass."""
    if route.request.method == "GET":
        held.append(route)
    else:
        route.continue_()


def _wait_held(page: Page, held: list[Route], limit: float = 10.0) -> None:
    """Poll (Playwright's own wait, so its route handlers run) until a read is held."""
    deadline = time.monotonic() + limit
    while not held and time.monotonic() < deadline:
        page.wait_for_timeout(25)
    assert held, "the form did not read the remote again after the refusal"
