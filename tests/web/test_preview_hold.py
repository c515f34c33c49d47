"""No error overlay mid-answer, against a real ``kiln serve``: the demo answer twice in one chat
(the first run and a follow-up), the preview frame sampled every 250 ms for Vite's error overlay
(``vite-error-overlay``) while each run streams. The demo app imports ``zustand``, installed
during the answer, and files that import ones not yet written: without the hold of hot updates
(sandbox/preview/hmr_hold.py) the overlay shows in the frame. The panel says "Building…" until
the run's first complete state."""

from __future__ import annotations

import time

from playwright.sync_api import Page, expect

from tests.web.conftest import RUN_LIMIT_MS, screenshot
from tests.web.recording import send_message

SAMPLE_MS = 250


def sample_run(page: Page, footers_before: int) -> list[tuple[str, int]]:
    """(panel label, overlays in the frame) every 250 ms until this run's footer completes."""
    footer = page.locator(".run-footer").nth(footers_before)
    deadline = time.monotonic() + RUN_LIMIT_MS / 1000
    samples: list[tuple[str, int]] = []
    while time.monotonic() < deadline:
        overlays = page.frame_locator("#preview-frame").locator("vite-error-overlay").count()
        samples.append((page.locator("#preview-state").inner_text(), overlays))
        if overlays:
            screenshot(page, f"preview-overlay-run-{footers_before + 1}")
        if footer.count() and footer.get_attribute("data-state") == "completed":
            return samples
        page.wait_for_timeout(SAMPLE_MS)  # the sampling period itself, not a wait for a state
    raise AssertionError(f"run {footers_before + 1} did not complete; samples: {samples[-5:]}")


def test_no_error_overlay_during_a_run_and_its_follow_up(kiln_page: Page) -> None:
    page = kiln_page
    for run in range(2):
        send_message(page, "make me a todo app")
        samples = sample_run(page, run)
        shown = [overlays for _label, overlays in samples if overlays]
        assert not shown, f"run {run + 1}: Vite's error overlay showed in {len(shown)} samples"
        labels = [label for label, _overlays in samples]
        assert "Building…" in labels, f"run {run + 1}: never said Building…: {set(labels)}"
        heading = page.frame_locator("#preview-frame").get_by_role("heading", name="Todos")
        heading.wait_for(timeout=RUN_LIMIT_MS)
        expect(page.locator("#preview-state")).to_have_text("Live", timeout=RUN_LIMIT_MS)
