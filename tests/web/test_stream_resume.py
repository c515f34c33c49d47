"""The event stream (``app/web/events.js``) against the stand-in service, which can do what the
real one cannot be made to do on demand: cut the SSE connection in the middle of a run.

Every cut makes the page reconnect with ``?after=<last seq>``, and the stand-in answers with a
few events the page already has (as a live stream racing a replay may); the transcript must
still hold the demo's prose exactly once and the file tree every file of the recording.
"""

from __future__ import annotations

from playwright.sync_api import Page

from tests.web.conftest import fake_base_url, screenshot, sign_in
from tests.web.fake_service import FakeService
from tests.web.recording import DEMO_FILES, demo_prose, normalized, send_message, tree_paths

CUT_EVERY = 40  # events per SSE connection: several reconnects during one demo run
OVERLAP = 5  # events sent again after each reconnect


def test_a_stream_cut_again_and_again_resumes_without_duplicates(
    page: Page, fake_service: FakeService
) -> None:
    fake_service.cut_every, fake_service.overlap = CUT_EVERY, OVERLAP
    base = fake_base_url(fake_service)
    sign_in(page, f"{base}/login?token={fake_service.login_token}")
    send_message(page, "make me a todo app")
    page.locator(".run-footer[data-state='completed']").wait_for(timeout=60_000)
    prose = " ".join(page.locator(".msg.assistant .prose").all_inner_texts())
    assert normalized(prose) == normalized(demo_prose())
    assert fake_service.connections > 3, "the stream was never cut: the test proves nothing"
    assert tree_paths(page) >= set(DEMO_FILES)
    screenshot(page, "fake-resumed-after-cuts")
