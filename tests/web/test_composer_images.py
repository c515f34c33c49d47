"""Images in the composer, in a real Chromium against a real ``kiln serve``: pasted (a
ClipboardEvent holding a File) or picked, shown as thumbnails, refused in words before sending
(a 6 MB image, an HTML file renamed ``.png``, a fifth image), sent with the message, and shown
in the chat again after a reload from the owner-only image URL, byte for byte."""

from __future__ import annotations

import base64

from playwright.sync_api import Page, expect

from tests.image_samples import png
from tests.web.conftest import screenshot
from tests.web.kiln_service import LOOK_RECORDING
from tests.web.recording import choose_demo, send_message

# Dispatches a paste of one file on the message box, as a person pasting a screenshot does.
PASTE = """([name, type, data]) => {
  const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
  const transfer = new DataTransfer();
  transfer.items.add(new File([bytes], name, { type }));
  const init = { clipboardData: transfer, bubbles: true, cancelable: true };
  const paste = new ClipboardEvent("paste", init);
  document.getElementById("message-input").dispatchEvent(paste);
}"""
# Drops one file on the composer, as dragging it from a file manager does.
DROP = """([name, type, data]) => {
  const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
  const transfer = new DataTransfer();
  transfer.items.add(new File([bytes], name, { type }));
  const form = document.getElementById("composer");
  const init = { dataTransfer: transfer, bubbles: true, cancelable: true };
  for (const kind of ["dragover", "drop"]) form.dispatchEvent(new DragEvent(kind, init));
}"""
# The bytes an image of the chat serves, fetched by the page itself (its session cookie).
FETCH_BYTES = """async (src) => {
  const response = await fetch(src);
  const bytes = new Uint8Array(await response.arrayBuffer());
  let text = ""; for (const b of bytes) text += String.fromCharCode(b);
  return [response.status, btoa(text)];
}"""


def paste(page: Page, name: str, data: bytes, media_type: str = "image/png") -> None:
    """Paste a file called ``name`` into the message box."""
    page.evaluate(PASTE, [name, media_type, base64.b64encode(data).decode()])


def test_a_pasted_image_is_sent_with_the_message_and_shown_after_a_reload(
    kiln_page: Page,
) -> None:
    page = kiln_page
    choose_demo(page, LOOK_RECORDING)
    tray, refusal = page.locator("#composer-images"), page.locator("#composer-images-error")
    red = png(side=24, rgb=(220, 30, 30), padding=2_000)
    paste(page, "screenshot.png", red)
    expect(tray.locator("img")).to_have_count(1)
    expect(tray.get_by_role("img", name="Image 1: screenshot.png")).to_be_visible()

    paste(page, "page.png", b"<!doctype html><html><body>not an image</body></html>")
    expect(refusal).to_have_text("page.png is not a PNG, JPEG, WebP or GIF image.")
    paste(page, "huge.png", png(padding=6 * 1024 * 1024))
    expect(refusal).to_have_text("huge.png is 6.0 MB; an image may be at most 5 MB.")
    for number in range(2, 5):
        paste(page, f"more-{number}.png", png())
    expect(tray.locator("img")).to_have_count(4)
    paste(page, "fifth.png", png())
    expect(refusal).to_have_text("fifth.png: at most 4 images can go with one message.")
    expect(page.get_by_role("button", name="Attach images")).to_be_disabled()
    for number in (4, 3, 2):
        page.get_by_role("button", name=f"Remove image {number}").click()
    expect(tray.locator("img")).to_have_count(1)
    screenshot(page, "composer-image-attached")

    send_message(page, "what do you see?")
    sent = page.locator(".msg.user .msg-image")
    expect(sent).to_have_count(1)
    expect(tray).to_be_hidden()
    page.locator(".run-footer[data-state='completed']").wait_for()
    expect(page.locator(".card.problem.warning")).to_contain_text(
        "The recorded demo does not look at images"
    )

    page.reload()
    shown = page.locator(".msg.user .msg-image")
    expect(shown).to_have_count(1)
    src = shown.get_attribute("src") or ""
    assert src.startswith("/api/chats/")
    expect(shown).to_have_js_property("complete", True)
    assert shown.evaluate("(img) => img.naturalWidth") == 24
    status, data = page.evaluate(FETCH_BYTES, src)
    assert (status, base64.b64decode(data)) == (200, red)
    screenshot(page, "chat-message-with-image")


def test_a_picked_or_dropped_image_attaches_too(kiln_page: Page) -> None:
    page = kiln_page
    page.locator("#attach-input").set_input_files(
        files=[{"name": "mockup.png", "mimeType": "image/png", "buffer": png()}]
    )
    tray = page.locator("#composer-images")
    expect(tray.get_by_role("img", name="Image 1: mockup.png")).to_be_visible()
    page.evaluate(DROP, ["photo.jpg", "image/jpeg", base64.b64encode(png()).decode()])
    # Named .jpg and typed JPEG by the browser: the bytes decide (a PNG), as on the server.
    dropped = tray.get_by_role("img", name="Image 2: photo.jpg")
    expect(dropped).to_be_visible()
    assert (dropped.get_attribute("src") or "").startswith("data:image/png;base64,")
    page.get_by_role("button", name="Remove image 1").click()
    page.get_by_role("button", name="Remove image 1").click()
    expect(tray).to_be_hidden()
