"""The publish API and the published link through real HTTP (uvicorn), a real store and git
project store; vanilla versions (published as they are: no sandbox). A publish is a background
job: the tests follow it on its own event stream. A Vite app's build waits at a gate the test
opens (its sandbox is refused then): a publish that is still running. A Vite build in a real
sandbox is tests/publish/test_build's; a real browser's, through serve, tests/web/test_publish's."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import redis.asyncio

from app.api.app import build_app
from app.api.services import ApiSettings
from app.config import ServiceSettings
from app.projects.git_store import GitProjectStore
from app.projects.store import VersionInfo
from app.projects.sync import ProjectAccess
from app.publish.jobs import PublishJobs
from app.publish.publisher import Publisher
from app.publish.settings import PublishSettings
from app.publish.storage import LocalBuildStorage
from app.runs.service import RunService
from app.store import Store
from sandbox import SandboxError
from tests.api.harness import FakeSandboxes, Person, add_person, serving

pytestmark = pytest.mark.anyio

V1 = {"index.html": b"<h1>one</h1>\n", "app.js": b"console.log(1);\n", "server.js": b"//"}
V2 = {"index.html": b"<h1>two</h1>\n", "assets/app-1a2b.js": b"console.log(2);\n"}
NEXT = {"package.json": b'{"dependencies": {"next": "14.2.0"}}', "app/page.jsx": b"x"}
VITE = {"package.json": b'{"devDependencies": {"vite": "5.4.0"}}', "index.html": b"<p>"}
PER_HOUR = 3


class GatedSandboxes:
    """A build's sandboxes that start none: ``provision`` waits for ``gate``, then fails."""

    def __init__(self) -> None:
        self.gate = anyio.Event()

    async def provision(
        self, template: str, *, owner: str = "", chat: str = "", state: str = "in_use"
    ) -> Any:
        await self.gate.wait()
        raise SandboxError("the test's engine starts no sandbox")

    async def container_for(self, sandbox_id: str) -> Any:
        raise AssertionError("no sandbox was started")

    def install_queue(self, sandbox_id: str) -> Any:
        raise AssertionError("no sandbox was started")

    async def run_command(self, sandbox_id: str, argv: Sequence[str], on_output: Any = None) -> Any:
        raise AssertionError("no sandbox was started")

    async def destroy(self, sandbox_id: str) -> None:
        raise AssertionError("no sandbox was started")


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
    jobs: PublishJobs
    sandboxes: GatedSandboxes

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
    sandboxes = GatedSandboxes()
    settings = PublishSettings(max_bytes=4096, per_hour=PER_HOUR)
    publisher = Publisher(projects, store, storage, sandboxes, settings, project_max_bytes=2**20)
    jobs = PublishJobs(publisher, store)
    app = build_app(
        store,
        runs,
        FakeSandboxes(),
        settings=ApiSettings(public_host="localhost", public_port=8000),
        projects=ProjectAccess(projects),
        publish_jobs=jobs,
    )
    async with serving(app) as url, httpx.AsyncClient(base_url=url) as visitor:
        alice, bob = add_person(store, "alice", url), add_person(store, "bob", url)
        chat = store.create_chat(alice.user.id, "site")
        projects.commit(chat.id, V1, VersionInfo("run1", 1))
        projects.commit(chat.id, V2, VersionInfo("run2", 1))
        try:
            yield Served(url, store, projects, chat.id, alice, bob, visitor, jobs, sandboxes)
        finally:
            await alice.client.aclose()
            await bob.client.aclose()


async def publish(served: Served, version: str) -> httpx.Response:
    """The answer to publishing ``version`` (202 and the job, or a refusal)."""
    return await served.alice.client.post(f"/api/chats/{served.chat_id}/versions/{version}/publish")


async def followed(served: Served) -> list[dict[str, Any]]:
    """The chat's newest job from its event stream, each state it showed, until it ended."""
    seen: list[dict[str, Any]] = []
    path = f"/api/chats/{served.chat_id}/publish-job/events"
    with anyio.fail_after(30):
        async with served.alice.client.stream("GET", path, timeout=30) as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            async for line in stream.aiter_lines():
                if line.startswith("data: "):
                    seen.append(json.loads(line.removeprefix("data: "))["job"])
    return seen


async def published(served: Served, version: str) -> dict[str, Any]:
    """Publish ``version`` and follow its job to its end; the chat's publication then."""
    answer = await publish(served, version)
    assert answer.status_code == 202, answer.text
    job = (await followed(served))[-1]
    assert (job["id"], job["stage"], job["active"]) == (answer.json()["job"]["id"], "live", False)
    state = await served.alice.client.get(f"/api/chats/{served.chat_id}/publication")
    publication: dict[str, Any] = state.json()["publication"]
    return publication


async def test_publish_is_a_job_that_serves_the_version_and_a_later_one_moves_the_link(
    served: Served,
) -> None:
    answer = await publish(served, "1")
    assert answer.status_code == 202, answer.text
    job = answer.json()["job"]
    assert (job["version"], job["stage"], job["active"]) == (1, "queued", True)
    assert answer.headers["location"] == f"/api/chats/{served.chat_id}/publish-job"
    stages = [seen["stage"] for seen in await followed(served)]
    assert stages[-1] == "live"
    assert set(stages) <= {"queued", "building", "storing", "live"}
    shown = await served.alice.client.get(answer.headers["location"])
    assert shown.json()["job"] == {**job, **shown.json()["job"], "stage": "live", "active": False}
    body = (await served.alice.client.get(f"/api/chats/{served.chat_id}/publication")).json()[
        "publication"
    ]
    slug = body["slug"]
    assert body["published"]
    assert body["version"] == 1
    assert body["url"] == f"http://{slug}.apps.localhost:8000/"
    page = await served.visitor.get("/", headers=served.app_host(slug))
    assert (page.status_code, page.text) == (200, "<h1>one</h1>\n")
    kept_out = await served.visitor.get("/server.js", headers=served.app_host(slug))
    assert kept_out.status_code == 404  # the vanilla template's own server is not the app's

    second = await published(served, "latest")
    assert second["slug"] == slug  # the link is the chat's for good
    assert second["version"] == 2
    page = await served.visitor.get("/", headers=served.app_host(slug))
    assert page.text == "<h1>two</h1>\n"
    state = await served.alice.client.get(f"/api/chats/{served.chat_id}/publication")
    assert state.json()["publication"]["version"] == 2


async def test_unpublish_makes_the_link_a_404_at_once(served: Served) -> None:
    slug = (await published(served, "2"))["slug"]
    gone = await served.alice.client.delete(f"/api/chats/{served.chat_id}/publication")
    assert gone.status_code == 200
    assert gone.json()["publication"]["published"] is False
    page = await served.visitor.get("/", headers=served.app_host(slug))
    assert page.status_code == 404
    assert "unpublished" in page.text
    again = await served.alice.client.delete(f"/api/chats/{served.chat_id}/publication")
    assert (again.status_code, again.json()["error"]["code"]) == (404, "not_published")


async def test_the_published_files_carry_their_caching_and_safety_headers(served: Served) -> None:
    slug = (await published(served, "2"))["slug"]
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
    slug = (await published(served, "2"))["slug"]
    answer = await served.visitor.get(path, headers=served.app_host(slug))
    assert answer.status_code == status
    assert text in answer.text


async def test_an_unknown_slug_and_other_methods(served: Served) -> None:
    unknown = await served.visitor.get("/", headers=served.app_host("nosuchappatall"))
    assert unknown.status_code == 404
    slug = (await published(served, "2"))["slug"]
    posted = await served.visitor.post("/", headers=served.app_host(slug))
    assert (posted.status_code, posted.headers["allow"]) == (405, "GET, HEAD")


async def test_the_app_host_never_reaches_kiln_or_its_session(served: Served) -> None:
    slug = (await published(served, "2"))["slug"]
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
    no_job = await served.alice.client.get(f"/api/chats/{served.chat_id}/publish-job")
    assert (no_job.status_code, no_job.json()) == (200, {"job": None})
    assert await followed(served) == []  # no job: the stream ends at once
    their_job = await served.bob.client.get(f"/api/chats/{served.chat_id}/publish-job")
    assert their_job.status_code == 404
    anonymous = await served.visitor.post(f"/api/chats/{served.chat_id}/versions/1/publish")
    assert anonymous.status_code == 401


@pytest.mark.parametrize(
    ("files", "code", "words"),
    [
        pytest.param(NEXT, "publish_unsupported", "server code", id="nextjs"),
        pytest.param(
            {"index.html": b"x" * 5000}, "publish_too_large", "5000 bytes", id="too-large"
        ),
        pytest.param({"page.html": b"<p>"}, "publish_build_failed", "'index.html'", id="no-index"),
    ],
)
async def test_a_failed_publish_job_says_why_and_leaves_the_link(
    served: Served, files: dict[str, bytes], code: str, words: str
) -> None:
    slug = (await published(served, "2"))["slug"]
    served.projects.commit(served.chat_id, files, VersionInfo("run3", 1))
    answer = await publish(served, "3")
    assert answer.status_code == 202, answer.text
    job = (await followed(served))[-1]
    assert (job["version"], job["stage"], job["active"], job["code"]) == (3, "failed", False, code)
    assert words in job["message"]
    state = await served.alice.client.get(f"/api/chats/{served.chat_id}/publication")
    assert state.json()["publication"]["version"] == 2
    page = await served.visitor.get("/", headers=served.app_host(slug))
    assert page.text == "<h1>two</h1>\n"  # still the last good build


async def test_one_publish_per_chat_at_a_time_and_the_next_after_it_ended(served: Served) -> None:
    slug = (await published(served, "2"))["slug"]
    served.projects.commit(served.chat_id, VITE, VersionInfo("run3", 1))
    running = await publish(served, "3")  # a Vite app: its build waits at the gate
    assert running.status_code == 202, running.text
    await _until_stage(served, "building")
    second = await publish(served, "2")
    assert (second.status_code, second.json()["error"]["code"]) == (409, "publish_in_progress")
    assert "publishing version 3 already" in second.json()["error"]["message"]
    served.sandboxes.gate.set()
    job = (await followed(served))[-1]
    assert (job["id"], job["stage"], job["code"]) == (
        running.json()["job"]["id"],
        "failed",
        "publish_failed",
    )
    assert "no sandbox could be started" in job["message"]
    page = await served.visitor.get("/", headers=served.app_host(slug))
    assert page.text == "<h1>two</h1>\n"  # the previous version stays live
    assert (await publish(served, "1")).status_code == 202  # the chat may publish again


async def test_a_job_whose_server_died_ends_in_words_and_frees_the_chat(served: Served) -> None:
    served.store.start_publish_job("deadbeef", served.chat_id, served.alice.user.id, 1, "building")
    blocked = await publish(served, "2")
    assert (blocked.status_code, blocked.json()["error"]["code"]) == (409, "publish_in_progress")
    served.jobs.stale_seconds = 0.0  # as if it has not moved for longer than any job may run
    shown = (await served.alice.client.get(f"/api/chats/{served.chat_id}/publish-job")).json()
    assert (shown["job"]["id"], shown["job"]["stage"]) == ("deadbeef", "failed")
    assert shown["job"]["code"] == "publish_interrupted"
    assert "stopped before it ended" in shown["job"]["message"]


async def test_the_hourly_limit_is_a_429_in_words_with_retry_after(served: Served) -> None:
    for version in ("1", "2", "latest")[:PER_HOUR]:
        await published(served, version)
    refused = await publish(served, "1")
    assert refused.status_code == 429
    error = refused.json()["error"]
    assert error["code"] == "publish_rate_limited"
    assert "KILN_PUBLISH_PER_HOUR" in error["message"]
    assert "minutes" in error["message"]
    retry_after = int(refused.headers["retry-after"])
    assert retry_after == error["retry_after"]
    assert 3500 < retry_after <= 3600
    bobs = served.store.create_chat(served.bob.user.id, "bob's site")
    served.projects.commit(bobs.id, V1, VersionInfo("run1", 1))
    theirs = await served.bob.client.post(f"/api/chats/{bobs.id}/versions/1/publish")
    assert theirs.status_code == 202, theirs.text  # the limit is per user


async def _until_stage(served: Served, stage: str) -> None:
    """Poll the chat's job until it reaches ``stage``."""
    path = f"/api/chats/{served.chat_id}/publish-job"
    with anyio.fail_after(15):
        while (await served.alice.client.get(path)).json()["job"]["stage"] != stage:
            await anyio.sleep(0.02)
