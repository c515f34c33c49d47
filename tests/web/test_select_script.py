"""The preview's select-mode script (sandbox/preview/select.js) in a real Chromium: a page at
``<id>.preview.kiln.localhost`` in a frame of the UI at ``kiln.localhost`` (both answered by
the browser context's routes, the script's bytes as the proxy serves them). Off until the UI
turns it on; then hover outlines with ``component · file:line``, a click posts ``kiln-select``
(the app never sees it), a double-click edits text and Enter posts ``kiln-text-edit``, Escape
ends the mode. A parent at another origin can neither turn it on nor hear from it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, BrowserContext, Frame, Page, Route, expect

from sandbox.preview.reporter_injection import SELECT_PATH, script_bytes
from tests.web.conftest import desktop_context

UI = "http://kiln.localhost:8123"
PREVIEW = "http://abc123.preview.kiln.localhost:8123"
APP = """<!doctype html><html><head><script src="/__kiln/select.js"></script></head><body>
<main data-kiln-source="src/App.jsx:3:5" data-kiln-component="App">
  <h1 data-kiln-source="src/App.jsx:4:7" data-kiln-component="App">Todos</h1>
  <button data-kiln-source="src/App.jsx:5:7" onclick="window.clicked = true">Add</button>
  <p>no source</p>
</main></body></html>"""
PARENT = """<!doctype html><html><body>
<iframe id="preview" src="%s/" style="width:800px;height:500px"></iframe>
<script>
  window.got = [];
  window.addEventListener("message", (e) => window.got.push({origin: e.origin, data: e.data}));
  window.mode = (on) => document.getElementById("preview").contentWindow
    .postMessage({type: "kiln-select-mode", on}, "%s");
</script></body></html>"""


def _routes(context: BrowserContext, parent_origin: str) -> None:
    def parent(route: Route) -> None:
        route.fulfill(content_type="text/html", body=PARENT % (PREVIEW, PREVIEW))

    def preview(route: Route) -> None:
        if route.request.url.endswith(SELECT_PATH):
            route.fulfill(content_type="text/javascript", body=script_bytes(SELECT_PATH))
        else:
            route.fulfill(content_type="text/html", body=APP)

    context.route(f"{parent_origin}/", parent)
    context.route(f"{PREVIEW}/**", preview)


def _open(browser: Browser, parent_origin: str) -> Iterator[tuple[Page, Frame]]:
    context = desktop_context(browser)
    _routes(context, parent_origin)
    page = context.new_page()
    page.goto(f"{parent_origin}/")
    page.wait_for_function("window.got.some(m => m.data.type === 'kiln-select-ready')")
    frame = next(f for f in page.frames if f.url.startswith(PREVIEW))
    try:
        yield page, frame
    finally:
        context.close()


@pytest.fixture
def ui(browser: Browser) -> Iterator[tuple[Page, Frame]]:
    yield from _open(browser, UI)


def _got(page: Page, kind: str) -> list[dict[str, object]]:
    found = page.evaluate("kind => window.got.filter(m => m.data.type === kind)", kind)
    assert all(message["origin"] == PREVIEW for message in found)
    return [message["data"] for message in found]


def test_off_the_page_is_the_apps(ui: tuple[Page, Frame]) -> None:
    page, frame = ui
    frame.locator("button").click()
    assert frame.evaluate("window.clicked") is True
    assert _got(page, "kiln-select") == []
    assert frame.locator("[data-kiln-overlay]").count() == 0


def test_on_hover_outlines_and_a_click_selects(ui: tuple[Page, Frame]) -> None:
    page, frame = ui
    page.evaluate("window.mode(true)")
    frame.locator("h1").hover()
    expect(frame.locator("[data-kiln-overlay]")).to_have_text("App · src/App.jsx:4")
    frame.locator("p").hover()  # no location of its own: its nearest tagged ancestor
    expect(frame.locator("[data-kiln-overlay]")).to_have_text("App · src/App.jsx:3")
    frame.locator("h1").click()
    frame.locator("button").click()
    page.wait_for_function("window.got.filter(m => m.data.type === 'kiln-select').length === 2")
    heading, button = _got(page, "kiln-select")
    assert heading == {
        "type": "kiln-select",
        "file": "src/App.jsx",
        "line": 4,
        "column": 7,
        "tag": "h1",
        "text": "Todos",
        "component": "App",
    }
    assert (button["tag"], button["line"], "component" in button) == ("button", 5, False)
    assert frame.evaluate("window.clicked") is None  # the app never saw the click


def test_a_double_click_edits_the_text_and_enter_posts_it(ui: tuple[Page, Frame]) -> None:
    page, frame = ui
    page.evaluate("window.mode(true)")
    frame.locator("h1").dblclick()
    expect(frame.locator("h1")).to_have_attribute("contenteditable", "plaintext-only")
    frame.locator("h1").press("Control+a")
    frame.locator("h1").type("My todos")
    frame.locator("h1").press("Enter")
    page.wait_for_function("window.got.some(m => m.data.type === 'kiln-text-edit')")
    [edit] = _got(page, "kiln-text-edit")
    assert edit == {
        "type": "kiln-text-edit",
        "file": "src/App.jsx",
        "line": 4,
        "column": 7,
        "tag": "h1",
        "old_text": "Todos",
        "new_text": "My todos",
    }
    assert frame.locator("h1").get_attribute("contenteditable") is None


def test_escape_ends_the_mode_and_tells_the_ui(ui: tuple[Page, Frame]) -> None:
    page, frame = ui
    page.evaluate("window.mode(true)")
    frame.locator("h1").hover()
    frame.evaluate("window.focus()")  # a click in select mode does not focus the page
    page.keyboard.press("Escape")
    page.wait_for_function("window.got.some(m => m.data.type === 'kiln-select-mode')")
    assert _got(page, "kiln-select-mode") == [{"type": "kiln-select-mode", "on": False}]
    frame.locator("button").click()
    assert frame.evaluate("window.clicked") is True


def test_a_parent_at_another_origin_can_neither_turn_it_on_nor_hear_it(browser: Browser) -> None:
    context = desktop_context(browser)
    _routes(context, "http://evil.localhost:8123")
    page = context.new_page()
    try:
        page.goto("http://evil.localhost:8123/")
        frame = page.frame_locator("#preview")
        expect(frame.locator("h1")).to_have_text("Todos")
        page.evaluate("window.mode(true)")
        frame.locator("button").click()
        real = next(f for f in page.frames if f.url.startswith(PREVIEW))
        assert real.evaluate("window.clicked") is True  # still the app's: the mode stayed off
        assert json.loads(json.dumps(page.evaluate("window.got"))) == []
    finally:
        context.close()
