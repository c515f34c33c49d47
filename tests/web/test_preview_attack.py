"""The login CSRF from a preview, replayed in Chromium against kiln's real app (store, preview
gate, proxy and UI; the sandboxes are a fake whose "dev server" serves the attacker's page).
The UI is at ``kiln.localhost`` and the preview at ``<id>.preview.kiln.localhost``: the same
site, so the browser sends the UI's cookie along with the preview's requests to kiln.

The attack: mallory mints a preview sign-in link for her own sandbox; a generated app in the
victim's preview sends the UI's window to ``/login?token=<mallory's token>`` on a click, which
signed the victim's UI in as mallory. Now the iframe is sandboxed without top navigation, the
token does not sign in the UI anyway, and a preview cannot frame the UI (``frame-ancestors``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, Response
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.responses import Response as StarletteResponse
from starlette.routing import Route

from app.api.app import build_app
from app.api.services import ApiSettings
from app.store import Store
from tests.api.harness import FakeSandboxes
from tests.servers import UvicornThread, loopback_socket
from tests.web.conftest import PageProblems, desktop_context

PUBLIC_HOST = "kiln.localhost"
VICTIM_SANDBOX = "vvv111"
ATTACKER_SANDBOX = "mmm111"
BLOCKED_TOP_NAVIGATION = "allow-top-navigation"  # in Chromium's words on the refusal
FRAME_LIMIT_SECONDS = 15.0
# Chromium's words as it refuses the attack (the page under test reports them as problems).
EXPECTED_REFUSALS = [
    re.compile(r"frame-ancestors 'none'"),
    re.compile(r"does not have permission to navigate the target frame"),
    re.compile(r"status of 404 .*/favicon\.ico"),  # asked for by a JSON error page
]
# The generated app: a button that sends the top window to the attacker's sign-in link, and a
# frame that tries to show the UI inside the preview.
ATTACK_PAGE = """<!doctype html><title>App</title><h1>Generated app</h1>
<button id="go" onclick="window.top.location.href = '{login}'">Continue</button>
<button id="steal" onclick="steal()">Sync</button>
<iframe name="ui-inside" src="{ui}/"></iframe>
<script>
function steal() {{
  fetch('{ui}/api/chats', {{ mode: 'no-cors', credentials: 'include' }}).catch(() => {{}});
  const post = {{ method: 'POST', mode: 'no-cors', credentials: 'include', body: '{{}}' }};
  fetch('{ui}/api/chats', post).catch(() => {{}});
}}
</script>"""


class NoRuns:
    """The run service: the attack never starts a run."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the attack test does not use runs ({name})")


@dataclass
class Scene:
    """The served app, the victim's sign-in link and what the attacker's page will use."""

    ui: str
    store: Store
    victim_login: str
    victim_id: str
    attacker_page: dict[str, str]


@pytest.fixture
def scene(tmp_path: Path) -> Iterator[Scene]:
    """kiln's app on a loopback port; the victim's sandbox serves the attacker's page."""
    store = Store(tmp_path / "kiln.db", "a-test-secret-of-enough-length")
    page: dict[str, str] = {}

    async def attack(request: Request) -> StarletteResponse:
        return HTMLResponse(ATTACK_PAGE.format(**page))

    sandboxes = FakeSandboxes()
    sock = loopback_socket()
    port = sock.getsockname()[1]
    settings = ApiSettings(public_host=PUBLIC_HOST, public_port=port)
    app = build_app(store, NoRuns(), sandboxes, settings=settings)  # type: ignore[arg-type]
    upstream_app = Starlette(routes=[Route("/{path:path}", attack)])
    with UvicornThread(upstream_app) as upstream, UvicornThread(app, sock) as served:
        ui = f"http://{PUBLIC_HOST}:{served.port}"
        victim, mallory = store.create_user("victim"), store.create_user("mallory")
        sandboxes.add(VICTIM_SANDBOX, store.create_chat(victim.id, "mine").id, port=upstream.port)
        sandboxes.add(ATTACKER_SANDBOX, store.create_chat(mallory.id, "bait").id, port=1)
        page.update(
            ui=ui, login=f"{ui}/login?token={attacker_token(served.url, store, mallory.id)}"
        )
        login = f"{ui}/login?token={store.create_token(victim.id, 'login', 600)}"
        yield Scene(ui, store, login, victim.id, page)
    store.close()


def attacker_token(url: str, store: Store, mallory: str) -> str:
    """The token of a preview sign-in link mallory asks for, for her own sandbox."""
    headers = {"Authorization": f"Bearer {store.create_token(mallory, 'api')}"}
    response = httpx.post(f"{url}/api/sandboxes/{ATTACKER_SANDBOX}/preview-login", headers=headers)
    response.raise_for_status()
    return str(response.json()["url"]).split("token=", 1)[1]


@pytest.fixture
def victim_page(browser: Browser, scene: Scene, page_problems: PageProblems) -> Iterator[Page]:
    """The victim, signed in to the UI, with her preview open in the UI's own preview frame."""
    page_problems.allow += EXPECTED_REFUSALS
    context = desktop_context(browser)
    opened = context.new_page()
    opened.on("console", page_problems.console)
    opened.on("pageerror", page_problems.page_error)
    opened.goto(scene.victim_login)
    opened.locator("#app").wait_for(state="visible")
    preview = f"http://{VICTIM_SANDBOX}.preview.{PUBLIC_HOST}:{scene.ui.rsplit(':', 1)[1]}/"
    opened.evaluate(OPEN_PREVIEW, [preview, VICTIM_SANDBOX])
    yield opened
    context.close()
    problems = page_problems.unexpected()
    assert not problems, f"the page reported problems: {problems}"


# The UI's own preview panel (preview.js) on the UI's own frame element (index.html).
OPEN_PREVIEW = """async ([url, sandboxId]) => {
  const { PreviewPanel } = await import("/preview.js");
  const byId = (id) => document.getElementById(id);
  const els = { frame: byId("preview-frame"), overlay: byId("preview-overlay"),
    state: byId("preview-state"), address: byId("preview-address"),
    reload: byId("preview-reload"), open: byId("preview-open") };
  const signIn = async (id) => {
    const response = await fetch(`/api/sandboxes/${id}/preview-login`, { method: "POST" });
    return (await response.json()).url;
  };
  const readiness = async (id) => (await fetch(`/api/sandboxes/${id}/preview`)).json();
  new PreviewPanel(els, signIn, readiness).setUrl(url, sandboxId);
}"""


def who_is_signed_in(page: Page) -> str:
    """The user id the UI's session belongs to, as the API says."""
    return str(page.evaluate("async () => (await (await fetch('/api/me')).json()).user.id"))


def test_a_preview_cannot_send_the_ui_to_a_forged_sign_in(victim_page: Page, scene: Scene) -> None:
    page = victim_page
    app = page.frame_locator("#preview-frame")
    app.get_by_role("heading", name="Generated app").wait_for()
    with page.expect_console_message(lambda m: BLOCKED_TOP_NAVIGATION in m.text):
        app.locator("#go").click()  # a user's click: the activation a top navigation needs
    assert page.url == f"{scene.ui}/"
    assert who_is_signed_in(page) == scene.victim_id


def test_the_forged_sign_in_link_itself_signs_nobody_in(victim_page: Page, scene: Scene) -> None:
    response = victim_page.goto(scene.attacker_page["login"])
    assert response is not None
    assert response.status == 401
    victim_page.goto(f"{scene.ui}/")
    assert who_is_signed_in(victim_page) == scene.victim_id


def test_a_preview_cannot_frame_the_ui(victim_page: Page) -> None:
    app = victim_page.frame_locator("#preview-frame")
    app.get_by_role("heading", name="Generated app").wait_for()
    deadline = time.monotonic() + FRAME_LIMIT_SECONDS
    url = ""
    while url in ("", "about:blank") and time.monotonic() < deadline:
        frame = victim_page.frame(name="ui-inside")
        url = frame.url if frame is not None else ""
        victim_page.wait_for_timeout(50)  # Playwright's own event loop runs meanwhile
    assert url.startswith("chrome-error:"), url  # refused, not the UI at http://kiln.localhost:...


def test_a_preview_cannot_call_the_api_as_its_user(
    victim_page: Page, scene: Scene, page_problems: PageProblems
) -> None:
    """The preview is the UI's site, so the UI's cookie goes along with its requests to kiln:
    kiln refuses them all (Sec-Fetch-Site: same-site), reading as well as writing."""
    page_problems.allow.append(re.compile(r"status of 403 .*/api/chats"))  # the refusals
    page = victim_page
    app = page.frame_locator("#preview-frame")
    app.get_by_role("heading", name="Generated app").wait_for()
    answers: dict[str, int] = {}

    def seen(response: Response) -> bool:
        if response.url.startswith(f"{scene.ui}/api/chats"):
            answers[response.request.method] = response.status
        return len(answers) == 2

    with page.expect_event("response", predicate=seen):
        app.locator("#steal").click()
    assert answers == {"GET": 403, "POST": 403}
    assert [chat.title for chat in scene.store.list_chats(scene.victim_id)] == ["mine"]
