"""The publish API and the published link through real HTTP (uvicorn), a real store and git
project store; vanilla versions (published as they are: no sandbox). A Vite build in a real
sandbox is tests/publish/test_build's; a real browser's, tests/web/test_publish's."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import redis.asyncio

from app.api.app import build_app
from app.api.services import ApiSettings
from app.config import ServiceSettings
from app.projects.git_store import GitProjectStore
from app.projects.store import VersionInfo
from app.projects.sync import ProjectAccess
from app.publish.publisher import Publisher
from app.publish.settings import PublishSettings
from app.publish.storage import LocalBuildStorage
from app.runs.service import RunService
from app.store import Store
from tests.api.harness import FakeSandboxes, Person, add_person, serving

pytestmark = pytest.mark.anyio

V1 = {"index.html": b"<h1>one</h1>\n", "app.js": b"console.log(1);\n", "server.js": b"//"}
V2 = {"index.html": b"<h1>two</h1>\n", "assets/app-1a2b.js": b"console.log(2);\n"}
NEXT = {"package.json": b'{"dependencies": {"next": "14.2.0"}}', "app/page.jsx": b"x"}


@dataclass
class Served:
    """A served API whose alice owns a chat with two vanilla versions; bob owns nothing."""

    url: str
    store: Store
    projects: GitProjectStore
    chat_id: str
    alice: Person
    bob: Person
    visitor: httpx.AsyncClient  # no credentials at all

    def app_host(self, slug: str) -> dict[str, str]:
        return {"host": f"{slug}.apps.localhost:8000"}


@pytest.fixture
async def served(
    store: Store,
    api_redis: redis.asyncio.Redis,
    service_settings: ServiceSettings,
    tmp_path: Path,
) -> AsyncIterator[Served]:
    projects = GitProjectStore(tmp_path / "projects")
    runs = RunService(store, api_redis, service_settings, env={})
    storage = LocalBuildStorage(tmp_path / "published")
    publisher = Publisher(
        projects, store, storage, None, PublishSettings(max_bytes=4096), project_max_bytes=2**20
    )
    app = build_app(
        store,
        runs,
        FakeSandboxes(),
        settings=ApiSettings(public_host="localhost", public_port=8000),
        projects=ProjectAccess(projects),
        publisher=publisher,
    )
    async with serving(app) as url, httpx.AsyncClient(base_url=url) as visitor:
        alice, bob = add_person(store, "alice", url), add_person(store, "bob", url)
        chat = store.create_chat(alice.user.id, "site")
        projects.commit(chat.id, V1, VersionInfo("run1", 1))
        projects.commit(chat.id, V2, VersionInfo("run2", 1))
        try:
            yield Served(url, store, projects, chat.id, alice, bob, visitor)
        finally:
            await alice.client.aclose()
            await bob.client.aclose()


async def publish(served: Served, version: str) -> httpx.Response:
    return await served.alice.client.post(f"/api/chats/{served.chat_id}/versions/{version}/publish")


async def test_publish_serves_the_version_and_a_later_one_moves_the_link(served: Served) -> None:
    first = await publish(served, "1")
    assert first.status_code == 201, first.text
    body = first.json()["publication"]
    slug = body["slug"]
    assert body["published"]
    assert body["version"] == 1
    assert body["url"] == f"http://{slug}.apps.localhost:8000/"
    page = await served.visitor.get("/", headers=served.app_host(slug))
    assert (page.status_code, page.text) == (200, "<h1>one</h1>\n")
    kept_out = await served.visitor.get("/server.js", headers=served.app_host(slug))
    assert kept_out.status_code == 404  # the vanilla template's own server is not the app's

    second = await publish(served, "latest")
    assert second.json()["publication"]["slug"] == slug  # the link is the chat's for good
    assert second.json()["publication"]["version"] == 2
    page = await served.visitor.get("/", headers=served.app_host(slug))
    assert page.text == "<h1>two</h1>\n"
    state = await served.alice.client.get(f"/api/chats/{served.chat_id}/publication")
    assert state.json()["publication"]["version"] == 2


async def test_unpublish_makes_the_link_a_404_at_once(served: Served) -> None:
    slug = (await publish(served, "2")).json()["publication"]["slug"]
    gone = await served.alice.client.delete(f"/api/chats/{served.chat_id}/publication")
    assert gone.status_code == 200
    assert gone.json()["publication"]["published"] is False
    page = await served.visitor.get("/", headers=served.app_host(slug))
    assert page.status_code == 404
    assert "unpublished" in page.text
    again = await served.alice.client.delete(f"/api/chats/{served.chat_id}/publication")
    assert (again.status_code, again.json()["error"]["code"]) == (404, "not_published")


async def test_the_published_files_carry_their_caching_and_safety_headers(served: Served) -> None:
    slug = (await publish(served, "2")).json()["publication"]["slug"]
    host = served.app_host(slug)
    index = await served.visitor.get("/", headers=host)
    asset = await served.visitor.get("/assets/app-1a2b.js", headers=host)
    assert index.headers["cache-control"] == "no-cache"
    assert index.headers["content-type"] == "text/html; charset=utf-8"
    assert asset.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert asset.headers["content-type"] == "text/javascript; charset=utf-8"
    for answer in (index, asset):
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert "default-src 'self'" in answer.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in answer.headers.get_list("content-security-policy")
        assert "set-cookie" not in answer.headers
    again = await served.visitor.get(
        "/assets/app-1a2b.js", headers={**host, "if-none-match": asset.headers["etag"]}
    )
    assert (again.status_code, again.content) == (304, b"")
    head = await served.visitor.head("/", headers=host)
    assert (head.status_code, head.content) == (200, b"")
    assert head.headers["content-length"] == str(len(b"<h1>two</h1>\n"))


@pytest.mark.parametrize(
    ("path", "status", "text"),
    [
        pytest.param("/todos/3", 200, "<h1>two</h1>\n", id="spa-route"),
        pytest.param("/missing.png", 404, "no file", id="file-not-there"),
        pytest.param("/%2e%2e/kiln.db", 404, "no file", id="climbing-finds-nothing"),
    ],
)
async def test_paths_outside_the_build(served: Served, path: str, status: int, text: str) -> None:
    slug = (await publish(served, "2")).json()["publication"]["slug"]
    answer = await served.visitor.get(path, headers=served.app_host(slug))
    assert answer.status_code == status
    assert text in answer.text


async def test_an_unknown_slug_and_other_methods(served: Served) -> None:
    unknown = await served.visitor.get("/", headers=served.app_host("nosuchappatall"))
    assert unknown.status_code == 404
    slug = (await publish(served, "2")).json()["publication"]["slug"]
    posted = await served.visitor.post("/", headers=served.app_host(slug))
    assert (posted.status_code, posted.headers["allow"]) == (405, "GET, HEAD")


async def test_the_app_host_never_reaches_kiln_or_its_session(served: Served) -> None:
    slug = (await publish(served, "2")).json()["publication"]["slug"]
    api = await served.alice.client.get("/api/me", headers=served.app_host(slug))
    assert api.status_code == 200  # the SPA's index, not kiln's API
    assert api.text == "<h1>two</h1>\n"


async def test_publishing_needs_the_chat_and_the_version(served: Served) -> None:
    theirs = await served.bob.client.post(f"/api/chats/{served.chat_id}/versions/1/publish")
    assert theirs.status_code == 404
    state = await served.bob.client.get(f"/api/chats/{served.chat_id}/publication")
    assert state.status_code == 404
    missing = await publish(served, "9")
    assert (missing.status_code, missing.json()["error"]["code"]) == (404, "version_not_found")
    never = await served.alice.client.get(f"/api/chats/{served.chat_id}/publication")
    assert (never.status_code, never.json()) == (200, {"publication": None})
    anonymous = await served.visitor.post(f"/api/chats/{served.chat_id}/versions/1/publish")
    assert anonymous.status_code == 401


@pytest.mark.parametrize(
    ("files", "status", "code"),
    [
        pytest.param(NEXT, 422, "publish_unsupported", id="nextjs"),
        pytest.param({"index.html": b"x" * 5000}, 413, "publish_too_large", id="too-large"),
        pytest.param({"page.html": b"<p>"}, 422, "publish_build_failed", id="no-index"),
    ],
)
async def test_a_refused_publish_says_why_and_leaves_the_link(
    served: Served, files: dict[str, bytes], status: int, code: str
) -> None:
    slug = (await publish(served, "2")).json()["publication"]["slug"]
    served.projects.commit(served.chat_id, files, VersionInfo("run3", 1))
    answer = await publish(served, "3")
    assert (answer.status_code, answer.json()["error"]["code"]) == (status, code)
    assert answer.json()["error"]["message"]
    page = await served.visitor.get("/", headers=served.app_host(slug))
    assert page.text == "<h1>two</h1>\n"  # still the last good build
