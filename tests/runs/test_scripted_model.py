"""Iterating on an app through a real SDK: the worker's ``openai-compatible`` provider (the
``openai`` SDK) calls a local model (:mod:`tests.runs.scripted_model`) that answers from what it
is sent, with real Redis, a Docker sandbox, workers and HTTP.

Alice asks for a todo app (the model answers with the shared recording), then asks to rename its
heading. The model answers that with an edit of ``src/App.jsx`` only if the request shows it the
file, and builds the edit from the file as shown. The edit must land in the same sandbox, leave
every other file byte for byte, and the dev server must serve the change.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator

import anyio
import pytest

from app.config import ServiceSettings
from app.projects.workspace_io import read_workspace
from app.runs.worker import default_provider_factory
from tests.api.harness import Person, add_person
from tests.api.stack import LiveService
from tests.end_to_end import EndToEnd, serve_end_to_end
from tests.runs.scripted_model import Change, ScriptedModel, serve
from tests.runs.test_edit_end_to_end import run_to_end

pytestmark = [pytest.mark.anyio, pytest.mark.docker, pytest.mark.slow, pytest.mark.npm]

SECRET = "scripted-model-secret-0123456789"
MODEL = "scripted-coder"
PROVIDER = "openai-compatible"
RENAME = Change(
    request="rename the heading",
    path="src/App.jsx",
    old="      <h1>Todos</h1>\n",
    new="      <h1>My scripted todos</h1>\n",
)
PREVIEW_LIMIT_SECONDS = 120
END_TO_END = EndToEnd("scripted", 13, SECRET)


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedModel]:
    """The scripted model, served on a loopback port (``model.url`` set once it listens)."""
    scripted = ScriptedModel(RENAME)
    with serve(scripted) as server:
        scripted.url = f"{server.url}/v1"
        yield scripted


@pytest.fixture(scope="module")
async def live(
    instance: str,
    redis_url: str,
    model: ScriptedModel,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[LiveService]:
    """The module's kiln, its runs answered by the scripted model (not replayed)."""
    env = {"KILN_OPENAI_COMPATIBLE_BASE_URL": model.url, "KILN_OPENAI_COMPATIBLE_MODEL": MODEL}
    root = tmp_path_factory.mktemp(END_TO_END.name)
    providers = default_provider_factory(env)
    async with serve_end_to_end(
        END_TO_END, instance, redis_url, root, providers=providers, provider_env=env
    ) as served:
        yield served


async def preview_serves(who: Person, sandbox_id: str, port: int, path: str, text: str) -> bool:
    """Poll the dev server (through kiln's preview host) until ``path`` carries ``text``."""
    host = f"{sandbox_id}.preview.kiln.localhost:{port}"
    with anyio.move_on_after(PREVIEW_LIMIT_SECONDS):
        while True:
            page = await who.client.get(f"/{path}", headers={"Host": host, "Accept": "*/*"})
            if page.status_code == 200 and text in page.text:
                return True
            await anyio.sleep(1)
    return False


async def test_a_follow_up_through_the_sdk_edits_the_file_it_was_shown(
    live: LiveService, model: ScriptedModel
) -> None:
    alice = add_person(live.stack.store, f"alice-{secrets.token_hex(3)}", live.url)
    port = ServiceSettings.port
    try:
        chat = await alice.client.post("/api/chats", json={"title": "todos"})
        chat_id = chat.json()["chat"]["id"]
        first, _ = await run_to_end(alice, chat_id, MODEL, content="a todo app", provider=PROVIDER)
        container = await live.stack.manager.container_for(first["sandbox_id"])
        before = (await read_workspace(container)).files
        second, events = await run_to_end(
            alice, chat_id, MODEL, content=RENAME.request, provider=PROVIDER
        )
        container = await live.stack.manager.container_for(second["sandbox_id"])
        after = (await read_workspace(container)).files
        served = await preview_serves(alice, second["sandbox_id"], port, RENAME.path, "My scripted")
    finally:
        await alice.client.aclose()
    app = before[RENAME.path].decode()
    assert model.shown == [app.rstrip()], "the follow-up did not show the file as it is"
    context = next(e for e in events if e.get("type") == "context")
    assert RENAME.path in {item["path"] for item in context["included"]}
    assert second["sandbox_id"] == first["sandbox_id"]
    assert after[RENAME.path].decode() == app.replace(RENAME.old, RENAME.new)
    untouched = {path: content for path, content in before.items() if path != RENAME.path}
    assert {path: after.get(path) for path in untouched} == untouched
    assert [e["path"] for e in events if e.get("type") == "edit_applied"] == [RENAME.path]
    assert not [e for e in events if e.get("type") == "error"]
    assert served, f"the dev server did not serve the change within {PREVIEW_LIMIT_SECONDS} s"
