"""What the preview's own page reports, in the preview panel (stand-in service, which serves
issue 23's per-sandbox stream ``GET /api/sandboxes/{id}/preview-errors``): an error bar with
"Fix it" that sends a follow-up carrying the errors, a bounded Console cleared on reload, errors
always shown as text, a stream that resumes where it was cut, and the chat's current sandbox
followed; and against a real ``kiln serve``, a click that throws in the app reaches "Fix it"."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import Page, expect

from tests.waiting import wait_until
from tests.web.conftest import RUN_LIMIT_MS, PageProblems, fake_base_url, screenshot, sign_in
from tests.web.fake_service import FakeService
from tests.web.recording import send_message

HOSTILE = "<img src=x onerror=\"document.title='owned'\"><b>bold</b>"


def preview_error(message: str, kind: str = "uncaught", **fields: Any) -> dict[str, Any]:
    """A preview error of the contract's shape."""
    error = {"kind": kind, "message": message, "stack": "", "source": None, "url": "", "count": 1}
    return {**error, **fields}


CLICK_ERROR = preview_error(
    "Cannot read properties of undefined (reading 'name')",
    source={"file": "src/App.jsx", "line": 12, "column": 5},
    url="http://x.preview.localhost/todos",
)


def built_app(page: Page, service: FakeService, message: str = "make me a todo app") -> str:
    """Send ``message``, wait for its run and for the preview's load at the run's end (which
    clears the console, so a report made before it would be gone); the id of the sandbox shown."""
    before = len(service.runs)
    send_message(page, message)
    wait_until(lambda: len(service.runs) > before, "the message's run", 60)
    footers = page.locator(".run-footer[data-state='completed']")
    expect(footers).to_have_count(len(service.runs), timeout=60_000)
    run = max(service.runs.values(), key=lambda run: run.created)
    sandbox_id = run.sandbox_id
    assert sandbox_id is not None
    # The page reads the ended run, then signs the frame in to what it built: the frame's load
    # after both is the run's last.
    chain = [f"run {run.id}", f"login {sandbox_id}", f"frame {sandbox_id}"]
    wait_until(lambda: _in_order(service.asked, chain), "the preview's load at the run's end", 60)
    page.frame_locator("#preview-frame").get_by_role("heading", name="Todos").wait_for()
    return sandbox_id


def _in_order(asked: list[str], chain: list[str]) -> bool:
    """Whether ``chain`` occurs in ``asked`` in its order (others may come in between)."""
    rest = iter(list(asked))
    return all(step in rest for step in chain)


def open_app(page: Page, service: FakeService) -> str:
    sign_in(page, f"{fake_base_url(service)}/login?token={service.login_token}")
    return built_app(page, service)


def test_fix_it_sends_the_error_as_a_follow_up(page: Page, fake_service: FakeService) -> None:
    sandbox_id = open_app(page, fake_service)
    huge = preview_error("x" * 1_000_000, kind="unhandled_rejection")  # a hostile page's
    fake_service.preview_errors.report(sandbox_id, huge)
    fake_service.preview_errors.report(sandbox_id, CLICK_ERROR)
    bar = page.get_by_role("status").filter(has=page.get_by_role("button", name="Fix it"))
    expect(bar).to_contain_text("Cannot read properties of undefined (reading 'name')")
    expect(bar).to_contain_text("src/App.jsx:12:5")
    screenshot(page, "preview-error-bar")

    bar.get_by_role("button", name="Fix it").click()
    expect(bar).to_be_hidden()
    expect(page.locator(".run-footer[data-state='completed']")).to_have_count(2, timeout=60_000)
    chat_id = next(iter(fake_service.messages))
    sent = fake_service.messages[chat_id][-1]["content"]
    assert "Cannot read properties of undefined (reading 'name')" in sent
    assert "at src/App.jsx:12:5" in sent
    assert "page: http://x.preview.localhost/todos" in sent
    assert "Unhandled promise rejection: xxx" in sent
    assert len(sent) <= 4000  # the huge message cut to a few hundred characters
    expect(page.locator(".msg.user").last).to_contain_text("src/App.jsx:12:5")


def test_a_console_line_is_no_error_and_html_stays_text(
    page: Page, fake_service: FakeService
) -> None:
    sandbox_id = open_app(page, fake_service)
    fake_service.preview_errors.report(sandbox_id, preview_error("loaded", kind="console_log"))
    toggle = page.get_by_role("button", name="Console (1)")
    toggle.click()
    console = page.get_by_role("log", name="Preview console lines")
    expect(console).to_contain_text("loaded")
    expect(page.locator("#preview-error-bar")).to_be_hidden()  # a log line is no finding

    fake_service.preview_errors.report(sandbox_id, preview_error(HOSTILE, kind="console_error"))
    expect(page.locator("#preview-error-bar")).to_contain_text(HOSTILE)
    expect(console).to_contain_text(HOSTILE)
    expect(page.locator("#panel-preview img, #panel-preview b")).to_have_count(0)
    assert page.title() != "owned"


def test_ten_thousand_reports_keep_the_console_bounded(
    page: Page, fake_service: FakeService
) -> None:
    sandbox_id = open_app(page, fake_service)
    for n in range(10_000):
        fake_service.preview_errors.report(sandbox_id, preview_error(f"spam {n}"))
    toggle = page.get_by_role("button", name="Console (10000)")
    expect(toggle).to_be_visible(timeout=60_000)
    toggle.click()
    lines = page.locator("#preview-console-lines .console-line")
    expect(lines.last).to_contain_text("spam 9999")
    assert lines.count() <= 500
    expect(page.locator("#preview-error-bar")).to_contain_text("spam 9999")
    # The page still answers: the composer takes a message.
    page.get_by_label("Message").fill("still here")
    expect(page.get_by_label("Message")).to_have_value("still here")


def test_the_console_is_cleared_when_the_preview_reloads(
    page: Page, fake_service: FakeService
) -> None:
    sandbox_id = open_app(page, fake_service)
    fake_service.preview_errors.report(sandbox_id, preview_error("before the reload"))
    page.get_by_role("button", name="Console (1)").click()
    console = page.get_by_role("log", name="Preview console lines")
    expect(console).to_contain_text("before the reload")
    page.get_by_role("button", name="Reload").click()
    expect(console).not_to_contain_text("before the reload")
    expect(page.locator("#preview-error-bar")).to_be_hidden()
    expect(page.get_by_role("button", name="Console", exact=True)).to_be_visible()


def test_a_cut_stream_resumes_without_duplicates(page: Page, fake_service: FakeService) -> None:
    fake_service.preview_errors.cut_every = 2
    sandbox_id = open_app(page, fake_service)
    for n in range(5):
        fake_service.preview_errors.report(sandbox_id, preview_error(f"error {n}"))
    page.get_by_role("button", name="Console (5)").click()
    lines = page.locator("#preview-console-lines .console-line")
    expect(lines.last).to_contain_text("error 4")
    expect(lines).to_have_count(5)
    resumed = {raw.rpartition("-")[2] for raw in fake_service.preview_errors.resumed_from}
    assert {"2", "4"} <= resumed


def test_the_panel_follows_the_chats_new_sandbox(page: Page, fake_service: FakeService) -> None:
    first = open_app(page, fake_service)
    second = built_app(page, fake_service, "make it blue")  # the stand-in: a new sandbox a run
    assert second != first
    fake_service.preview_errors.report(first, preview_error("from the old sandbox"))
    fake_service.preview_errors.report(second, preview_error("from the new sandbox"))
    expect(page.locator("#preview-error-bar")).to_contain_text("from the new sandbox")
    page.get_by_role("button", name="Console (1)").click()
    expect(page.locator("#preview-console-lines")).not_to_contain_text("old sandbox")


def test_a_refused_stream_is_opened_again(
    page: Page, fake_service: FakeService, page_problems: PageProblems
) -> None:
    """An HTTP error ends an EventSource for good: the panel opens the stream anew, later."""
    page_problems.allow.append(re.compile(r"status of 503"))
    fake_service.preview_errors.unavailable = 3
    sandbox_id = open_app(page, fake_service)
    fake_service.preview_errors.report(sandbox_id, preview_error("after the outage"))
    expect(page.locator("#preview-error-bar")).to_contain_text("after the outage")
    assert fake_service.preview_errors.unavailable == 0


def test_a_click_that_throws_in_the_real_preview_reaches_fix_it(
    kiln_page: Page, page_problems: PageProblems
) -> None:
    """Against a real ``kiln serve``: a handler of the app in the pane throws on a click; the
    preview's reporter, kiln's stream and the panel bring it to the error bar, and "Fix it"
    sends it as the chat's next message."""
    page = kiln_page
    page_problems.allow.append(re.compile(r"reading 'name'"))  # the app's error, not kiln's
    send_message(page, "make me a todo app")
    page.locator(".run-footer[data-state='completed']").wait_for(timeout=RUN_LIMIT_MS)
    app = page.frame_locator("#preview-frame")
    app.get_by_role("heading", name="Todos").wait_for()
    expect(page.locator("#preview-state")).to_have_text("Live")
    frame = next(f for f in page.frames if ".preview." in f.url)
    frame.evaluate(BREAKING_BUTTON)
    app.get_by_role("button", name="Break").click()

    bar = page.locator("#preview-error-bar")
    expect(bar).to_contain_text("Cannot read properties of null (reading 'name')")
    screenshot(page, "preview-error-bar-real")
    bar.get_by_role("button", name="Fix it").click()
    expect(bar).to_be_hidden()
    sent = page.locator(".msg.user").last
    expect(sent).to_contain_text("Cannot read properties of null (reading 'name')")
    expect(sent).to_contain_text("page: http")
    page.locator(".run-footer[data-state='completed']").nth(1).wait_for(timeout=RUN_LIMIT_MS)


# A button whose click handler reads a property of null, the way a generated app's would.
BREAKING_BUTTON = """() => {
  const button = document.createElement("button");
  button.textContent = "Break";
  button.addEventListener("click", () => { const user = null; return user.name; });
  document.body.append(button);
}"""


def test_an_earlier_visits_errors_are_not_shown_again(
    page: Page, fake_service: FakeService
) -> None:
    """The stream replays what the sandbox kept (kiln keeps a day): opening the chat again
    shows what its page says now, not an error of an hour ago that may be long fixed."""
    sandbox_id = open_app(page, fake_service)
    fake_service.preview_errors.report(sandbox_id, preview_error("an hour ago"), age=3600)
    fake_service.preview_errors.report(sandbox_id, preview_error("just now"))
    # The replay comes after the frame's load cleared the panel (else that clear could hide it).
    fake_service.preview_errors.after_frame_load = True
    page.reload()
    bar = page.locator("#preview-error-bar")
    expect(bar).to_contain_text("just now")
    page.get_by_role("button", name="Console (1)").click()
    expect(page.locator("#preview-console-lines")).not_to_contain_text("an hour ago")
