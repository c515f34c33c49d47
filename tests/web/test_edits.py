"""Iterating on an app in the browser against a real ``kiln serve``: build the demo todo app, then
change it three times in plain words. Each change is a recording of its own that answers with one
``<edward_edit>`` block; each must change its one line and nothing else (every file of the
sandbox read through the files API before and after), show as an edit card in the chat, and show
in the preview: brought by the one reload the preview hold sends at the turn's first complete
state (sandbox/preview/hmr_hold.py: no half-applied state mid-answer), and the frame element is
never replaced.
The cards of edit mode (context, file read, applied and refused edits) are also checked from
scripted events on the stand-in service.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.web.conftest import RUN_LIMIT_MS, fake_base_url, screenshot, sign_in
from tests.web.fake_service import FakeService
from tests.web.kiln_service import KilnService
from tests.web.recording import choose_demo, page_fetch, send_message

COMPLETED = ".run-footer[data-state='completed']"
FRAME = "#preview-frame"
KILN_VERSION = ".kiln/version"  # kiln's own marker of the project's version: each run moves it


@dataclass(frozen=True)
class Change:
    """One follow-up: what the person asks, the one line the model's edit changes, and what the
    preview then shows."""

    recording: str
    request: str
    path: str
    old: str
    new: str
    shows: str  # a CSS selector of the preview that finds the change

    def answer(self) -> str:
        """The model's answer: one edit block for the one line."""
        return (
            f"<Response>\nDone: {self.request}.\n\n"
            '<edward_sandbox project="todo-app" base="vite-react">\n'
            f'<edward_edit path="{self.path}">\n<<<<<<< SEARCH\n{self.old}=======\n{self.new}'
            ">>>>>>> REPLACE\n</edward_edit>\n</edward_sandbox>\n</Response>\n<edward_done />\n"
        )


CHANGES = (
    Change(
        "edit-heading",
        "call the heading My todos",
        "src/App.jsx",
        "      <h1>Todos</h1>\n",
        "      <h1>My todos</h1>\n",
        "h1:text-is('My todos')",
    ),
    Change(
        "edit-empty-text",
        "say All clear when the list is empty",
        "src/components/TodoList.jsx",
        '    return <p className="empty">Nothing to do. Enjoy the quiet.</p>;\n',
        '    return <p className="empty">All clear. Enjoy the quiet.</p>;\n',
        "p.empty:text-is('All clear. Enjoy the quiet.')",
    ),
    Change(
        "edit-clear-button",
        "name the clear button Clear finished",
        "src/App.jsx",
        "          Clear done\n",
        "          Clear finished\n",
        "footer button:text-is('Clear finished')",
    ),
)


def project_files(page: Page, kiln: KilnService) -> dict[str, str]:
    """Every file of the newest run's sandbox, through the files API (the page's cookies)."""
    run_id = page.locator(".msg.assistant").last.get_attribute("data-run")
    run = page_fetch(page, f"/api/runs/{run_id}").json()
    base = f"/api/sandboxes/{run['sandbox_id']}/files"
    listed = page_fetch(page, base).json()["files"]
    files: dict[str, str] = {}
    for item in listed:
        if item["path"] == KILN_VERSION:
            continue
        response = page_fetch(page, f"{base}/{item['path']}")
        assert response.status == 200, f"{item['path']}: {response.status} {response.text}"
        files[item["path"]] = response.text
    return files


def mark_frame(page: Page) -> None:
    """Tag the preview's frame element (a replaced element would lose the tag)."""
    page.locator(FRAME).evaluate("frame => { frame.kilnEditsMark = true; }")


@pytest.mark.npm
def test_three_changes_in_words_each_edit_only_its_line(kiln: KilnService, kiln_page: Page) -> None:
    page = kiln_page
    # The service reads its recordings folder on each request (kiln_service writes it there).
    recordings = Path(kiln.log).parent / "recordings"
    for change in CHANGES:
        (recordings / f"{change.recording}.txt").write_text(change.answer())
    page.reload()  # the page learns the recordings from /api/me when it starts
    page.locator("#app").wait_for(state="visible")
    send_message(page, "make me a todo app")
    page.locator(COMPLETED).wait_for(timeout=RUN_LIMIT_MS)
    preview = page.frame_locator(FRAME)
    expect(preview.locator("h1")).to_have_text("Todos", timeout=30_000)
    mark_frame(page)
    frame = next(f for f in page.frames if ".preview." in f.url)
    for number, change in enumerate(CHANGES, start=2):
        before = project_files(page, kiln)
        assert change.old in before[change.path]
        choose_demo(page, change.recording)
        send_message(page, change.request)
        frame.wait_for_selector(change.shows, timeout=RUN_LIMIT_MS)
        expect(page.locator(COMPLETED)).to_have_count(number, timeout=RUN_LIMIT_MS)
        answer = page.locator(".msg.assistant").last
        edits = answer.locator(".card.edit")
        expect(edits.locator(".card-title")).to_have_text([f"Edited {change.path} (1 block)"])
        expect(edits).to_have_attribute("data-state", "ok")
        expect(answer.locator(".card.context summary")).to_contain_text("Looked at")
        expect(answer.locator(".card.problem")).to_have_count(0)
        after = project_files(page, kiln)
        expected = {**before, change.path: before[change.path].replace(change.old, change.new)}
        assert after == expected
        expect(preview.locator(change.shows)).to_be_visible(timeout=30_000)
        assert page.locator(FRAME).evaluate("frame => frame.kilnEditsMark === true")
    expect(preview.locator("h1")).to_have_text("My todos")
    screenshot(page, "edits-three-changes")


NO_MATCH = (
    "block 1 of 'src/store.js': its SEARCH text matches nowhere in the file; "
    "no block of this edit was applied"
)
EDIT_EVENTS = [
    {
        "type": "context",
        "mode": "edit",
        "budget_tokens": 20000,
        "map_tokens": 87,
        "included": [
            {"path": "src/App.jsx", "reason": "entrypoint", "tokens": 46},
            {"path": "src/store.js", "reason": "named in the request", "tokens": 120},
        ],
        "left_out": [{"path": "src/big.json", "reason": "over the budget", "tokens": 30000}],
    },
    {"type": "read", "path": "src/store.js", "turn": 1},
    {"type": "tool_result", "tool": "read", "request": "src/store.js", "ok": True, "text": "x"},
    {"type": "edit_start", "path": "src/store.js", "turn": 1},
    {"type": "edit_block", "path": "src/store.js", "search": "a", "replace": "b", "turn": 1},
    {"type": "edit_end", "path": "src/store.js", "turn": 1},
    {"type": "error", "code": "edit_no_match", "message": NO_MATCH, "severity": "recoverable"},
    {"type": "edit_start", "path": "src/App.jsx", "turn": 1},
    {"type": "edit_block", "path": "src/App.jsx", "search": "a", "replace": "b", "turn": 1},
    {"type": "edit_block", "path": "src/App.jsx", "search": "c", "replace": "d", "turn": 1},
    {"type": "edit_end", "path": "src/App.jsx", "turn": 1},
    {"type": "edit_applied", "path": "src/App.jsx", "blocks": 2},
    {"type": "file_written", "path": "src/App.jsx"},
]


def test_context_reads_and_edits_are_cards_in_words(page: Page, fake_service: FakeService) -> None:
    fake_service.prelude = EDIT_EVENTS
    sign_in(page, f"{fake_base_url(fake_service)}/login?token={fake_service.login_token}")
    send_message(page, "rename the heading")
    page.locator(COMPLETED).wait_for()
    context = page.locator(".card.context")
    expect(context.locator("summary")).to_have_text("⌕Looked at 2 files of the project, 1 left out")
    expect(context.locator(".context-included")).to_be_hidden()  # collapsed
    context.locator("summary").click()
    expect(context.locator(".context-included li")).to_have_text(
        ["src/App.jsx (entrypoint, 46 tokens)", "src/store.js (named in the request, 120 tokens)"]
    )
    expect(context.locator(".context-left-out li")).to_have_text(
        ["src/big.json (over the budget, 30000 tokens)"]
    )
    read = page.locator(".card.tool")
    expect(read.locator(".card-title")).to_have_text("Looking at src/store.js")
    expect(read).to_have_attribute("data-state", "ok")
    edits = page.locator(".card.edit")
    expect(edits.locator(".card-title")).to_have_text(
        ["Edit of src/store.js not applied", "Edited src/App.jsx (2 blocks)"]
    )
    expect(edits.first).to_have_attribute("data-state", "failed")
    problem = page.locator(".card.problem.recoverable")
    expect(problem).to_contain_text("An edit did not match the file")
    expect(problem).to_contain_text("matches nowhere")
    screenshot(page, "fake-edit-cards")
