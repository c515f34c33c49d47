"""The versions API on a real git project store (no sandboxes: end to end with Docker is in
``tests/projects/test_restore_end_to_end``)."""

from __future__ import annotations

import io
import zipfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

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

V1 = {"index.html": b"<h1>one</h1>\n", "app.js": b"console.log(1);\n"}
V2 = {"index.html": b"<h1>two</h1>\n", "app.js": b"console.log(1);\n", "new.css": b"h1{}\n"}


@dataclass
class Served:
    """A served API whose alice owns a chat with two versions; bob owns nothing."""

    projects: GitProjectStore
    chat_id: str
    alice: Person
    bob: Person


@pytest.fixture
async def served(
    store: Store,
    api_redis: redis.asyncio.Redis,
    service_settings: ServiceSettings,
    tmp_path: Path,
) -> AsyncIterator[Served]:
    projects = GitProjectStore(tmp_path / "projects")
    runs = RunService(store, api_redis, service_settings, env={})
    app = build_app(
        store,
        runs,
        FakeSandboxes(),
        settings=ApiSettings(public_host="localhost", public_port=8000),
        projects=ProjectAccess(projects),
    )
    async with serving(app) as url:
        alice, bob = add_person(store, "alice", url), add_person(store, "bob", url)
        chat = store.create_chat(alice.user.id, "site")
        projects.commit(chat.id, V1, VersionInfo("run1", 1))
        projects.commit(chat.id, V2, VersionInfo("run2", 1))
        try:
            yield Served(projects, chat.id, alice, bob)
        finally:
            await alice.client.aclose()
            await bob.client.aclose()


async def test_the_versions_are_listed_oldest_first(served: Served) -> None:
    answer = await served.alice.client.get(f"/api/chats/{served.chat_id}/versions")
    assert answer.status_code == 200
    listed = answer.json()["versions"]
    assert [(v["version"], v["run"], v["turn"]) for v in listed] == [(1, "run1", 1), (2, "run2", 1)]
    assert listed[1]["summary"] == "1 added, 1 changed, 0 removed"
    assert listed[1]["files"] == [
        {"path": "index.html", "status": "M"},
        {"path": "new.css", "status": "A"},
    ]


async def test_the_diff_is_per_file(served: Served) -> None:
    answer = await served.alice.client.get(f"/api/chats/{served.chat_id}/versions/2/diff")
    assert answer.status_code == 200
    files = answer.json()["files"]
    assert [(f["path"], f["status"]) for f in files] == [("index.html", "M"), ("new.css", "A")]
    assert "-<h1>one</h1>\n+<h1>two</h1>\n" in files[0]["diff"]


async def test_restore_without_a_sandbox_records_a_new_version(served: Served) -> None:
    answer = await served.alice.client.post(f"/api/chats/{served.chat_id}/versions/1/restore")
    assert answer.status_code == 201
    body = answer.json()
    assert (body["restored"], body["version"]["version"], body["sandbox_id"]) == (1, 3, None)
    assert body["version"]["note"] == "restored version 1"
    assert served.projects.files(served.chat_id, "latest") == V1


async def test_the_archive_is_a_zip_of_the_version(served: Served) -> None:
    answer = await served.alice.client.get(f"/api/chats/{served.chat_id}/versions/1/archive")
    assert answer.status_code == 200
    assert (
        answer.headers["content-disposition"] == f'attachment; filename="{served.chat_id}-v1.zip"'
    )
    with zipfile.ZipFile(io.BytesIO(answer.content)) as archive:
        assert {name: archive.read(name) for name in archive.namelist()} == V1


@pytest.mark.parametrize(
    "suffix",
    [
        pytest.param("/9/diff", id="past-the-end"),
        pytest.param("/0/archive", id="zero"),
        pytest.param("/first/diff", id="not-a-number"),
        pytest.param("/²/diff", id="superscript-two"),
        pytest.param("/③/archive", id="circled-three"),
        pytest.param("/\u0662/diff", id="arabic-indic-two"),  # int() reads it as 2
        pytest.param("/\uff11/archive", id="fullwidth-one"),
        pytest.param(f"/1{'0' * 5000}/diff", id="more-digits-than-int-reads"),
        pytest.param("/%C2%B2/restore", id="restore-superscript"),
    ],
)
async def test_an_unknown_version_is_a_404_in_words(served: Served, suffix: str) -> None:
    url = f"/api/chats/{served.chat_id}/versions{suffix}"
    method = "POST" if suffix.endswith("/restore") else "GET"
    answer = await served.alice.client.request(method, url)
    assert answer.status_code == 404
    error = answer.json()["error"]
    assert error["code"] == "version_not_found"
    assert "no version" in error["message"]


@pytest.mark.parametrize(
    ("method", "suffix"),
    [
        pytest.param("GET", "", id="list"),
        pytest.param("GET", "/1/diff", id="diff"),
        pytest.param("POST", "/1/restore", id="restore"),
        pytest.param("GET", "/latest/archive", id="archive"),
    ],
)
async def test_another_users_chat_is_a_404(served: Served, method: str, suffix: str) -> None:
    answer = await served.bob.client.request(
        method, f"/api/chats/{served.chat_id}/versions{suffix}"
    )
    assert answer.status_code == 404
    assert answer.json()["error"]["code"] == "not_found"
    assert len(served.projects.versions(served.chat_id)) == 2


async def test_a_chat_without_versions_lists_none(served: Served, store: Store) -> None:
    chat = store.create_chat(served.alice.user.id, "empty")
    answer = await served.alice.client.get(f"/api/chats/{chat.id}/versions")
    assert answer.json() == {"versions": []}


async def test_a_server_without_projects_says_so(
    store: Store, api_redis: redis.asyncio.Redis, service_settings: ServiceSettings
) -> None:
    runs = RunService(store, api_redis, service_settings, env={})
    async with serving(build_app(store, runs, FakeSandboxes())) as url:
        alice = add_person(store, "alice", url)
        chat = store.create_chat(alice.user.id, "site")
        async with alice.client:
            answer = await alice.client.get(f"/api/chats/{chat.id}/versions")
    assert answer.status_code == 503
    assert answer.json()["error"]["code"] == "projects_unavailable"


async def test_restore_waits_for_the_chats_run(served: Served, store: Store) -> None:
    message = store.add_message(served.chat_id, "user", "make it")
    store.create_run(served.chat_id, served.alice.user.id, message.id, "replay", "todo")
    answer = await served.alice.client.post(f"/api/chats/{served.chat_id}/versions/1/restore")
    assert answer.status_code == 409
    error = answer.json()["error"]
    assert error["code"] == "run_active"
    assert "has a run in progress" in error["message"]
    assert len(served.projects.versions(served.chat_id)) == 2
