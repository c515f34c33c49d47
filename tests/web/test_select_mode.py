"""Select mode end to end (issue 26's first "Done means"), in a real Chromium against a real
``kiln serve`` with real vite-react sandboxes: the demo todo app is built; in the preview the
person turns on Select, hovers the heading (its outline names ``App · src/App.jsx:<line>``),
clicks it (a chip above the composer), and asks "make this bigger" of a local OpenAI-compatible
model server. The request that server receives names the heading's file and line; the server,
a model that edits only what it is pointed at, answers with one edit of that line; the change
lands in that file and nowhere else; the message shows its selection again after a reload; and
``data-kiln-source`` is in no file of the sandbox or the version's zip.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import zipfile
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.providers.wire_servers import Answer, Reply, WireServer
from tests.web.conftest import RUN_LIMIT_MS, desktop_context, sign_in
from tests.web.kiln_service import KilnService, start_kiln
from tests.web.recording import demo_files, send_message
from tests.web.test_edits import project_files

SELECT_REDIS_DB = 8  # the session's kiln has 9; 6 text edits
COMPLETED = ".run-footer[data-state='completed']"
FRAME = "#preview-frame"
MODEL = "pointed-editor"
HEADING = "<h1>Todos</h1>"
BIGGER = '<h1 style={{ fontSize: "3em" }}>Todos</h1>'
HEADING_LINE = next(
    n for n, line in enumerate(demo_files()["src/App.jsx"].splitlines(), 1) if HEADING in line
)
# A zip from the API, as base64 (the page's session; binary cannot come back as text).
ZIP_FETCH = """async (path) => {
  const answer = await fetch(path);
  if (!answer.ok) throw new Error(`${path}: ${answer.status}`);
  const bytes = new Uint8Array(await answer.arrayBuffer());
  let text = "";
  for (const byte of bytes) text += String.fromCharCode(byte);
  return btoa(text);
}"""
# What the user turn says of a selected element (app/agent/selection.py).
POINTED = re.compile(r"at (\S+) line (\d+), column \d+\.\n\s+The line reads: (.+)")


class PointedEditor(WireServer):
    """A model that edits only what the request points at: the first selected element's line,
    as the user turn quotes it, gets a larger font; without a pointer it changes nothing."""

    def _next_reply(self) -> Reply:
        messages = self.requests[-1].body.get("messages", [])
        asked = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
        found = POINTED.search(asked if isinstance(asked, str) else json.dumps(asked))
        if found is None:
            return Answer(("<Response>\nI do not know which element you mean.\n</Response>\n",))
        path, line = found[1], found[3].strip()
        bigger = line.replace("<h1>", '<h1 style={{ fontSize: "3em" }}>', 1)
        answer = (
            "<Response>\nMade it bigger.\n\n"
            '<edward_sandbox project="todo-app" base="vite-react">\n'
            f'<edward_edit path="{path}">\n<<<<<<< SEARCH\n{line}\n=======\n{bigger}\n'
            ">>>>>>> REPLACE\n</edward_edit>\n</edward_sandbox>\n</Response>\n<edward_done />\n"
        )
        return Answer((answer,))


@pytest.fixture(scope="module")
def model_server() -> Iterator[PointedEditor]:
    with PointedEditor("openai") as server:
        yield server


@pytest.fixture(scope="module")
def select_kiln(
    tmp_path_factory: pytest.TempPathFactory, redis_url: str, model_server: PointedEditor
) -> Iterator[KilnService]:
    """A ``kiln serve`` of its own that knows the local model server."""
    settings = {"KILN_OPENAI_COMPATIBLE_BASE_URL": f"{model_server.url}/v1"}
    before = {name: os.environ.get(name) for name in settings}
    os.environ.update(settings)
    try:
        web_redis_url = redis_url.rsplit("/", 1)[0] + f"/{SELECT_REDIS_DB}"
        service = start_kiln(tmp_path_factory.mktemp("kiln-select"), web_redis_url)
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    yield service
    service.stop()


def choose(page: Page, provider: str, model: str) -> None:
    """Make ``provider``/``model`` the page's choice (as the settings dialog stores it)."""
    choice = json.dumps({"provider": provider, "model": model})
    page.evaluate("choice => localStorage.setItem('kiln.choice', choice)", choice)
    page.reload()
    page.locator("#app").wait_for(state="visible")


@pytest.mark.npm
def test_a_selected_heading_is_what_the_model_is_pointed_at_and_what_changes(
    browser: Browser, select_kiln: KilnService, model_server: PointedEditor
) -> None:
    context = desktop_context(browser)
    context.set_default_timeout(30_000)
    page = context.new_page()
    try:
        sign_in(page, select_kiln.login_url)
        choose(page, "replay", "todo-app")
        send_message(page, "make me a todo app")
        page.locator(COMPLETED).wait_for(timeout=2 * RUN_LIMIT_MS)  # a guard: installs, build
        chat_url = page.url
        choose(page, "openai-compatible", MODEL)
        page.goto(chat_url)
        preview = page.frame_locator(FRAME)
        heading = preview.locator("h1")
        expect(heading).to_have_text("Todos", timeout=60_000)
        expect(heading).to_have_attribute("data-kiln-source", f"src/App.jsx:{HEADING_LINE}:7")
        before = project_files(page, select_kiln)

        page.get_by_role("button", name="Select", exact=True).click()
        expect(page.get_by_role("button", name="Select", exact=True)).to_have_attribute(
            "aria-pressed", "true"
        )
        heading.hover()
        label = preview.locator("[data-kiln-overlay]")
        expect(label).to_have_text(f"App · src/App.jsx:{HEADING_LINE}")
        heading.click()
        chip = page.locator("#selection-chips .selection-chip")
        expect(chip).to_have_text(f"<h1> Todos src/App.jsx:{HEADING_LINE}\u00d7")

        model_server.script()  # its answers are made from each request
        send_message(page, "make this bigger")
        expect(page.locator(COMPLETED)).to_have_count(2, timeout=RUN_LIMIT_MS)
        expect(page.locator("#selection-chips")).to_be_hidden()  # the selection went with it

        seen = model_server.requests[0]  # the turn that was asked (a fix-up turn may follow)
        assert seen.body["model"] == MODEL
        asked = seen.body["messages"][-1]["content"]
        assert asked.startswith("make this bigger")
        assert f"src/App.jsx line {HEADING_LINE}, column 7" in asked
        after = project_files(page, select_kiln)
        app = before["src/App.jsx"].splitlines(keepends=True)
        app[HEADING_LINE - 1] = app[HEADING_LINE - 1].replace(HEADING, BIGGER)
        assert after == {**before, "src/App.jsx": "".join(app)}
        expect(heading).to_have_css("font-size", re.compile(r"^\d+(\.\d+)?px$"))
        assert heading.evaluate("h => h.style.fontSize") == "3em"

        page.reload()
        kept = page.locator(".msg.user").last.locator(".selection-chip")
        expect(kept).to_have_text(f"<h1> Todos src/App.jsx:{HEADING_LINE}")
        assert not [path for path, text in after.items() if "data-kiln" in text]
        chat_id = chat_url.rsplit("/", 1)[-1]
        archive = base64.b64decode(
            page.evaluate(ZIP_FETCH, f"/api/chats/{chat_id}/versions/latest/archive")
        )
        with zipfile.ZipFile(io.BytesIO(archive)) as zipped:
            assert not [n for n in zipped.namelist() if b"data-kiln" in zipped.read(n)]
    finally:
        context.close()
