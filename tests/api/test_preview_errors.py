"""``GET /api/sandboxes/{id}/preview-errors`` (SSE) fed by ``POST /__kiln/preview-errors`` on the
preview host, through the whole app (gate, proxy, Redis): owner only, resumable, attributed."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
import pytest
import redis.asyncio
from starlette.applications import Starlette
from starlette.responses import HTMLResponse
from starlette.routing import Route

from app.api.app import build_app
from app.api.preview_errors import as_events
from app.api.services import ApiSettings
from app.config import ServiceSettings
from app.runs.service import RunService
from app.store import Store
from sandbox import PreviewErrorStream
from sandbox.preview.reporter_injection import SCRIPT_TAG
from tests.api.conftest import SECRET
from tests.api.harness import FakeSandboxes, Person, add_person, serving

pytestmark = pytest.mark.anyio
MINE, THEIRS = "abc123", "bbb222"
DEADLINE_SECONDS = 20.0


@dataclass
class ErrorsApi:
    alice: Person
    bob: Person


@dataclass
class Frame:
    id: str | None
    event: str | None
    data: dict[str, Any] | None


@pytest.fixture
async def errors_api(
    store: Store, api_redis: redis.asyncio.Redis, service_settings: ServiceSettings
) -> AsyncIterator[ErrorsApi]:
    """The app with preview errors kept; alice owns ``abc123``, bob ``bbb222`` (both served by
    one small dev server)."""
    dev = Starlette(routes=[Route("/", lambda request: HTMLResponse("<head></head>"))])
    runs = RunService(store, api_redis, service_settings)
    sandboxes = FakeSandboxes()
    settings = ApiSettings(
        public_host="localhost", public_port=8000, sse_ping_interval=0.2, secret_key=SECRET
    )
    stream = PreviewErrorStream(api_redis, poll_seconds=0.05)
    app = build_app(store, runs, sandboxes, settings=settings, preview_errors=stream)
    async with serving(dev) as dev_url, serving(app) as url:
        port = int(dev_url.rsplit(":", 1)[1])
        alice, bob = add_person(store, "alice", url), add_person(store, "bob", url)
        sandboxes.add(MINE, store.create_chat(alice.user.id, "a").id, port=port)
        sandboxes.add(THEIRS, store.create_chat(bob.user.id, "b").id, port=port)
        try:
            yield ErrorsApi(alice, bob)
        finally:
            await alice.client.aclose()
            await bob.client.aclose()
    store.close()


async def post_reports(person: Person, sandbox_id: str, reports: list[Any]) -> httpx.Response:
    host = f"{sandbox_id}.preview.localhost:8000"
    return await person.client.post("/__kiln/preview-errors", json=reports, headers={"host": host})


async def frames(
    person: Person, sandbox_id: str, count: int, headers: dict[str, str] | None = None
) -> list[Frame]:
    """The first ``count`` events of the stream (the stream itself never ends)."""
    found: list[Frame] = []
    frame = Frame(None, None, None)
    with anyio.fail_after(DEADLINE_SECONDS):
        async with person.client.stream(
            "GET", f"/api/sandboxes/{sandbox_id}/preview-errors", headers=headers
        ) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            async for line in response.aiter_lines():
                name, _, value = line.partition(": ")
                if name == "id":
                    frame.id = value
                elif name == "event":
                    frame.event = value
                elif name == "data":
                    frame.data = json.loads(value)
                elif line == "" and frame.data is not None:
                    found.append(frame)
                    frame = Frame(None, None, None)
                    if len(found) == count:
                        return found
    raise AssertionError("the stream ended")


def report(message: str) -> dict[str, Any]:
    return {"kind": "console_error", "message": message, "url": "http://x/"}


async def test_the_owner_follows_their_sandboxes_errors_and_resumes(errors_api: ErrorsApi) -> None:
    alice = errors_api.alice
    posted = await post_reports(alice, MINE, [report("first"), report("second")])
    assert posted.status_code == 202, posted.text
    first_two = await frames(alice, MINE, 2)
    assert [f.event for f in first_two] == ["preview_error", "preview_error"]
    assert first_two[0].data == {
        "type": "preview_error",
        **report("first"),
        "stack": "",
        "source": None,
        "count": 1,
    }
    await post_reports(alice, MINE, [report("third")])
    assert first_two[1].id is not None
    (resumed,) = await frames(alice, MINE, 1, headers={"last-event-id": first_two[1].id})
    assert resumed.data is not None
    assert resumed.data["message"] == "third"


async def test_others_get_404_and_cannot_report_into_it(errors_api: ErrorsApi) -> None:
    alice, bob = errors_api.alice, errors_api.bob
    response = await bob.client.get(f"/api/sandboxes/{MINE}/preview-errors")
    assert response.status_code == 404
    refused = await post_reports(bob, MINE, [report("from bob")])
    assert refused.status_code == 404
    await post_reports(bob, THEIRS, [report("bob's own")])
    await post_reports(alice, MINE, [report("alice's")])
    (first,) = await frames(alice, MINE, 1)
    assert first.data is not None
    assert first.data["message"] == "alice's"


@pytest.mark.parametrize(
    "value", [pytest.param("12", id="no-dash"), pytest.param("x-1", id="junk")]
)
async def test_a_bad_resume_point_is_a_400(errors_api: ErrorsApi, value: str) -> None:
    response = await errors_api.alice.client.get(
        f"/api/sandboxes/{MINE}/preview-errors", headers={"last-event-id": value}
    )
    assert response.status_code == 400
    assert "Last-Event-ID" in response.json()["error"]["message"]


async def test_the_owners_page_gets_the_reporter_through_the_gate(errors_api: ErrorsApi) -> None:
    host = f"{MINE}.preview.localhost:8000"
    navigate = {"host": host, "sec-fetch-mode": "navigate", "accept": "text/html"}
    page = await errors_api.alice.client.get("/", headers=navigate)
    assert page.status_code == 200
    assert page.text == f"<head>{SCRIPT_TAG.decode()}</head>"
    script = await errors_api.alice.client.get("/__kiln/reporter.js", headers={"host": host})
    assert script.status_code == 200
    assert b"__kilnReport" in script.content
    stranger = await errors_api.bob.client.get("/__kiln/reporter.js", headers={"host": host})
    assert stranger.status_code == 404


async def test_redis_going_away_ends_the_stream_cleanly() -> None:
    client = redis.asyncio.Redis.from_url("redis://127.0.0.1:1", socket_connect_timeout=1)
    try:
        events = [event async for event in as_events(PreviewErrorStream(client), MINE, "0-0")]
    finally:
        await client.aclose()
    assert events == []
