"""Issue 23's first "Done means", end to end: an app that builds but throws when it renders ends
fixed in the same run, with no person watching.

Real Redis, a Docker sandbox, the worker, HTTP, the real render browser and the worker's
``openai-compatible`` provider (the ``openai`` SDK) calling a local model that fixes only what it
is told: it answers the first request with an app whose ``src/App.jsx`` reads a property of
``undefined``, and answers a fix-up with the fixed file only when the request carries the
browser's message and ``src/App.jsx:<line>`` (else a 422 that fails the run, in words).
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field

import docker
import pytest
import redis

from app.config import ServiceSettings
from app.runs.worker import default_provider_factory
from tests.api.harness import add_person
from tests.api.stack import LiveService, live_service
from tests.runs.scripted_model import Json, message_text, serve
from tests.runs.test_edit_end_to_end import run_to_end
from tests.sandbox.docker_support import leftovers_but_claim, remove_npm_proxy, settings_for, sweep

pytestmark = [pytest.mark.anyio, pytest.mark.docker, pytest.mark.slow, pytest.mark.npm]

RENDER_REDIS_DB = 15  # others: sandbox 0, api 3, end-to-end 4, runs 7, web 9, projects 11-13
SECRET = "render-fixup-secret-0123456789ab"
MODEL = "render-fixer"
PROVIDER = "openai-compatible"
THROWN = "Cannot read properties of undefined (reading 'name')"
THROWING_LINE = 3  # of src/App.jsx below


def app_answer(user: str, note: str) -> str:
    """A whole answer writing ``src/App.jsx`` with ``user`` as its user."""
    return (
        f"<Response>\n{note}\n\n"
        '<edward_sandbox project="profile" base="vite-react">\n<file path="src/App.jsx">\n'
        "export default function App() {\n"
        f"  const user = {user};\n"
        "  return <h1>Hello {user.name}</h1>;\n"
        "}\n</file>\n</edward_sandbox>\n</Response>\n<edward_done />\n"
    )


BROKEN = app_answer("undefined", "A profile page.")
FIXED = app_answer('{ name: "Ada" }', "Fixed: the user is defined before it is read.")


@dataclass
class FixingModel:
    """Answers the app, then fixes it only when told the message and the file and line."""

    url: str = ""
    requests: list[Json] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def reply(self, body: Json) -> tuple[str | None, str]:
        """The answer to ``body``, or ``(None, why)`` for a fix-up that does not say what broke
        (served by :func:`tests.runs.scripted_model.serve`, like the scripted model)."""
        with self.lock:
            self.requests.append(body)
        users = [m for m in body.get("messages") or [] if m.get("role") == "user"]
        last = message_text(users[-1]) if users else ""
        if len(users) < 2:
            return BROKEN, ""
        told = THROWN in last and f"src/App.jsx:{THROWING_LINE}" in last
        return (FIXED, "") if told else (None, "the fix-up does not say what broke, nor where")


def render_redis_url(session_url: str) -> str:
    return session_url.rsplit("/", 1)[0] + f"/{RENDER_REDIS_DB}"


@pytest.fixture(scope="module")
def instance(redis_url: str) -> Iterator[str]:
    """This module's kiln instance; every Docker object of it must be gone at the end."""
    name = f"test-render-{secrets.token_hex(3)}"
    yield name
    client = docker.from_env()
    try:
        left = leftovers_but_claim(client, name)
        sweep(client, name, render_redis_url(redis_url))
    finally:
        client.close()
    assert not left, f"the render fix-up tests left Docker objects behind: {left}"


@pytest.fixture(scope="module")
def model() -> Iterator[FixingModel]:
    fixing = FixingModel()
    with serve(fixing) as server:  # type: ignore[arg-type]  # same reply() as ScriptedModel
        fixing.url = f"{server.url}/v1"
        yield fixing


@pytest.fixture(scope="module")
async def live(
    instance: str, redis_url: str, model: FixingModel, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[LiveService]:
    url = render_redis_url(redis_url)
    root = tmp_path_factory.mktemp("render")
    settings = ServiceSettings(root / "data", SECRET, redis_url=url)
    sandbox_settings = settings_for(instance, url, warm_pool_size=0)
    flusher = redis.Redis.from_url(url)
    flusher.flushdb()
    flusher.close()
    env = {"KILN_OPENAI_COMPATIBLE_BASE_URL": model.url, "KILN_OPENAI_COMPATIBLE_MODEL": MODEL}
    providers = default_provider_factory(env)
    async with live_service(
        settings, sandbox_settings, root / "rec", providers=providers, provider_env=env
    ) as served:
        yield served
        for record in await served.stack.manager.list():
            await served.stack.manager.destroy(record.id)
        await remove_npm_proxy(served.stack.manager.client, sandbox_settings.instance)


async def test_an_app_that_throws_when_it_renders_ends_fixed_in_the_same_run(
    live: LiveService, model: FixingModel
) -> None:
    alice = add_person(live.stack.store, f"alice-{secrets.token_hex(3)}", live.url)
    try:
        chat = await alice.client.post("/api/chats", json={"title": "profile"})
        chat_id = chat.json()["chat"]["id"]
        run, events = await run_to_end(
            alice, chat_id, MODEL, content="a profile page", provider=PROVIDER
        )
    finally:
        await alice.client.aclose()
    fixup = message_text([m for m in model.requests[-1]["messages"] if m["role"] == "user"][-1])
    assert THROWN in fixup
    assert f"src/App.jsx:{THROWING_LINE}" in fixup
    assert "const user = undefined;" in fixup  # the file as it was
    preview_errors = [e for e in events if e.get("type") == "preview_error"]
    assert any(THROWN in e["message"] for e in preview_errors), preview_errors
    renders = [e["render"] for e in events if e.get("type") == "postgen"]
    assert renders[0]["ok"] is False
    assert renders[-1]["ok"] is True, renders[-1]
    assert renders[-1]["skipped"] is None
    assert run["status"] == "completed"
