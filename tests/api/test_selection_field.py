"""The ``selection`` of a posted message, through HTTP on a real git project store: kept with
the message when the project holds it; refused in words (with a stable code) when malformed,
too large, or not in the project; a chat's first message cannot carry one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio

from app.api.app import build_app
from app.api.services import ApiSettings
from app.config import ServiceSettings
from app.projects.git_store import GitProjectStore
from app.projects.store import VersionInfo
from app.projects.sync import ProjectAccess
from app.runs.service import RunService
from app.store import Store
from tests.api.harness import FakeSandboxes, Person, add_person, serving

pytestmark = pytest.mark.anyio

APP = b"export default function App() {\n  return (\n    <h1>Todos</h1>\n  )\n}\n"
HEADING = {"file": "src/App.jsx", "line": 3, "column": 5, "tag": "h1", "text": "Todos"}
REPLAY = {"provider": "replay", "model": "todo-app"}


@dataclass
class Served:
    """A served API whose alice owns a chat with one version of a one-file app."""

    store: Store
    chat_id: str
    alice: Person


@pytest.fixture
async def served(
    store: Store,
    api_redis: redis.asyncio.Redis,
    service_settings: ServiceSettings,
    tmp_path: Path,
) -> AsyncIterator[Served]:
    projects = GitProjectStore(tmp_path / "projects")
    runs = RunService(store, api_redis, service_settings, env={})
    settings = ApiSettings(public_host="localhost", public_port=8000)
    app = build_app(
        store, runs, FakeSandboxes(), settings=settings, projects=ProjectAccess(projects)
    )
    async with serving(app) as url:
        alice = add_person(store, "alice", url)
        chat = store.create_chat(alice.user.id, "todos")
        projects.commit(chat.id, {"src/App.jsx": APP}, VersionInfo("run1", 1))
        try:
            yield Served(store, chat.id, alice)
        finally:
            await alice.client.aclose()


async def post(served: Served, selection: Any) -> Any:
    body = {"content": "make this bigger", "selection": selection, **REPLAY}
    return await served.alice.client.post(f"/api/chats/{served.chat_id}/messages", json=body)


async def test_a_selection_is_kept_with_the_message_and_its_source_line(served: Served) -> None:
    response = await post(served, [{**HEADING, "component": "App"}])
    assert response.status_code == 202, response.text
    chat = (await served.alice.client.get(f"/api/chats/{served.chat_id}")).json()
    assert chat["messages"][0]["data"] == {
        "selection": [{**HEADING, "component": "App", "source_line": "    <h1>Todos</h1>"}]
    }


async def test_no_selection_keeps_no_data(served: Served) -> None:
    assert (await post(served, None)).status_code == 202
    chat = (await served.alice.client.get(f"/api/chats/{served.chat_id}")).json()
    assert chat["messages"][0]["data"] is None


@pytest.mark.parametrize(
    ("selection", "words"),
    [
        pytest.param({"file": "src/App.jsx"}, "must be a list", id="not-a-list"),
        pytest.param([HEADING] * 9, "at most 8", id="too-many"),
        pytest.param(["src/App.jsx"], "must be an object", id="item-not-an-object"),
        pytest.param([{**HEADING, "style": "x"}], "unknown keys ['style']", id="unknown-key"),
        pytest.param([{**HEADING, "line": 0}], "'line' must be a whole number", id="line-zero"),
        pytest.param([{**HEADING, "line": "3"}], "'line' must be a whole number", id="line-text"),
        pytest.param([{**HEADING, "column": True}], "'column' must be", id="column-bool"),
        pytest.param([{**HEADING, "text": "x" * 301}], "'text' must be text of at most", id="long"),
        pytest.param([{**HEADING, "tag": ""}], "must not be empty", id="empty-tag"),
        pytest.param([{**HEADING, "component": 5}], "'component' must be text", id="component"),
    ],
)
async def test_a_malformed_selection_is_refused_naming_the_field(
    served: Served, selection: Any, words: str
) -> None:
    response = await post(served, selection)
    assert response.status_code == 422
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("invalid_request", "selection")
    assert words in error["message"]
    assert served.store.list_messages(served.chat_id) == []


@pytest.mark.parametrize(
    ("change", "words"),
    [
        pytest.param({"file": "src/Gone.jsx"}, "'src/Gone.jsx' is not in the project", id="file"),
        pytest.param({"line": 6}, "'src/App.jsx' has 5 lines", id="line-past-the-end"),
    ],
)
async def test_a_selection_the_project_does_not_hold_is_refused_in_words(
    served: Served, change: dict[str, Any], words: str
) -> None:
    response = await post(served, [{**HEADING, **change}])
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "selection_not_in_project"
    assert words in error["message"]
    assert served.store.list_messages(served.chat_id) == []


async def test_a_chat_without_a_project_refuses_a_selection(served: Served) -> None:
    other = served.store.create_chat(served.alice.user.id, "empty")
    body = {"content": "make this bigger", "selection": [HEADING], **REPLAY}
    response = await served.alice.client.post(f"/api/chats/{other.id}/messages", json=body)
    assert response.status_code == 422
    assert "no project yet" in response.json()["error"]["message"]


async def test_a_first_message_cannot_carry_a_selection(served: Served) -> None:
    body = {"message": {"content": "make this bigger", "selection": [HEADING], **REPLAY}}
    response = await served.alice.client.post("/api/chats", json=body)
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "selection_not_in_project"
