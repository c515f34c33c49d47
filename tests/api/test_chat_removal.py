"""Deleting a chat: its sandboxes, project and history go; a chat with a run in progress is
refused in words; only the owner may."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import redis.asyncio

from app.api.app import build_app
from app.config import ServiceSettings
from app.projects.git_store import GitProjectStore
from app.projects.store import VersionInfo
from app.projects.sync import ProjectAccess
from app.runs.service import RunService
from app.store import Store
from tests.api.conftest import Api
from tests.api.harness import FakeSandboxes, add_person, serving

pytestmark = pytest.mark.anyio


async def start_chat(client: httpx.AsyncClient) -> tuple[str, str]:
    response = await client.post("/api/chats", json={"message": {"content": "build it"}})
    assert response.status_code == 201, response.text
    return response.json()["chat"]["id"], response.json()["run_id"]


async def test_a_chat_with_a_run_in_progress_is_refused_in_words(api: Api) -> None:
    chat_id, _ = await start_chat(api.alice.client)
    response = await api.alice.client.delete(f"/api/chats/{chat_id}")
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "chat_busy"
    assert "run in progress" in error["message"]
    assert "cancel it" in error["message"]
    assert api.store.get_chat(chat_id) is not None


async def test_a_finished_chat_goes_with_its_sandboxes_and_history(api: Api) -> None:
    chat_id, run_id = await start_chat(api.alice.client)
    api.store.finish_run(run_id, "completed", "done")
    api.store.set_chat_sandbox(chat_id, "sbx-a")
    api.sandboxes.add("sbx-a", chat_id)
    assert (await api.bob.client.delete(f"/api/chats/{chat_id}")).status_code == 404
    response = await api.alice.client.delete(f"/api/chats/{chat_id}")
    assert response.status_code == 204, response.text
    assert api.sandboxes.destroyed == ["sbx-a"]
    assert api.store.get_chat(chat_id) is None
    assert api.store.get_run(run_id) is None
    assert (await api.alice.client.get(f"/api/chats/{chat_id}")).status_code == 404
    assert (await api.alice.client.get("/api/chats")).json()["chats"] == []
    assert (await api.alice.client.delete(f"/api/chats/{chat_id}")).status_code == 404


@pytest.fixture
async def served_with_projects(
    store: Store,
    api_redis: redis.asyncio.Redis,
    service_settings: ServiceSettings,
    tmp_path: Path,
) -> AsyncIterator[tuple[httpx.AsyncClient, GitProjectStore, Store]]:
    """The API with a real project store (and fake sandboxes)."""
    projects = GitProjectStore(tmp_path / "projects")
    runs = RunService(store, api_redis, service_settings, env={})
    app = build_app(store, runs, FakeSandboxes(), projects=ProjectAccess(projects))
    async with serving(app) as url:
        person = add_person(store, "carol", url)
        try:
            yield person.client, projects, store
        finally:
            await person.client.aclose()


async def test_the_chats_project_is_removed_with_it(
    served_with_projects: tuple[httpx.AsyncClient, GitProjectStore, Store],
) -> None:
    client, projects, store = served_with_projects
    chat_id, run_id = await start_chat(client)
    kept_id, kept_run = await start_chat(client)
    for chat, run in ((chat_id, run_id), (kept_id, kept_run)):
        projects.commit(chat, {"index.html": b"<h1>hi</h1>\n"}, VersionInfo(run, 1))
        store.finish_run(run, "completed", "done")
    assert (await client.delete(f"/api/chats/{chat_id}")).status_code == 204
    assert projects.versions(chat_id) == []
    assert not projects.repository(chat_id).exists()
    assert [v.number for v in projects.versions(kept_id)] == [1]
