"""Runs through HTTP: reading, cancelling, and the SSE event stream (replay, live, resume)."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest

from app.runs.events import events_channel, persist_and_publish
from tests.api.conftest import Api
from tests.api.harness import Person, SseFrame, sse_frames

pytestmark = pytest.mark.anyio

FINISHED = {"type": "run_finished", "status": "completed", "stop_reason": "done"}


async def start_run(api: Api, person: Person | None = None) -> str:
    person = person or api.alice
    chat = (await person.client.post("/api/chats", json={})).json()["chat"]
    posted = await person.client.post(
        f"/api/chats/{chat['id']}/messages", json={"content": "build it"}
    )
    assert posted.status_code == 202, posted.text
    run_id: str = posted.json()["run_id"]
    return run_id


async def emit(api: Api, run_id: str, *events: dict[str, Any]) -> list[int]:
    return await persist_and_publish(api.store, api.redis, run_id, list(events))


def texts(count: int) -> list[dict[str, Any]]:
    return [{"type": "text", "content": f"part {n} "} for n in range(count)]


async def collect(
    client: httpx.AsyncClient, run_id: str, headers: dict[str, str] | None = None, query: str = ""
) -> list[SseFrame]:
    frames = []
    with anyio.fail_after(20):
        async with client.stream(
            "GET", f"/api/runs/{run_id}/events{query}", headers=headers
        ) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            async for frame in sse_frames(response):
                frames.append(frame)
    return [frame for frame in frames if frame.comment is None]


async def test_get_run_shows_the_public_fields(api: Api) -> None:
    run_id = await start_run(api)
    response = await api.alice.client.get(f"/api/runs/{run_id}")
    assert response.status_code == 200
    run = response.json()
    assert set(run) == {
        *("id", "chat_id", "status", "stop_reason", "turns", "usage", "sandbox_id"),
        *("preview_url", "error", "created", "started", "finished"),
    }
    assert (run["id"], run["status"]) == (run_id, "queued")


async def test_cancel_a_queued_run_then_again(api: Api) -> None:
    run_id = await start_run(api)
    first = await api.alice.client.post(f"/api/runs/{run_id}/cancel")
    assert first.status_code == 202
    assert first.json()["run"]["status"] == "cancelled"
    again = await api.alice.client.post(f"/api/runs/{run_id}/cancel")
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "run_finished"
    frames = await collect(api.alice.client, run_id)
    assert frames[-1].event == "run_finished"
    assert frames[-1].data is not None
    assert frames[-1].data["status"] == "cancelled"


async def test_the_stream_replays_then_ends_after_run_finished(api: Api) -> None:
    run_id = await start_run(api)
    await emit(api, run_id, {"type": "run_started"}, *texts(3), FINISHED)
    frames = await collect(api.alice.client, run_id)
    assert [frame.id for frame in frames] == [1, 2, 3, 4, 5]
    assert [frame.event for frame in frames] == ["run_started", *["text"] * 3, "run_finished"]
    assert frames[1].data == {"type": "text", "content": "part 0 "}


@pytest.mark.parametrize(
    ("headers", "query"),
    [
        pytest.param({"Last-Event-ID": "3"}, "", id="last-event-id"),
        pytest.param({}, "?after=3", id="after"),
        pytest.param({"Last-Event-ID": "3"}, "?after=1", id="header-wins"),
    ],
)
async def test_the_stream_resumes_after_an_event(
    api: Api, headers: dict[str, str], query: str
) -> None:
    run_id = await start_run(api)
    await emit(api, run_id, {"type": "run_started"}, *texts(3), FINISHED)
    frames = await collect(api.alice.client, run_id, headers, query)
    assert [frame.id for frame in frames] == [4, 5]


@pytest.mark.parametrize(
    ("headers", "query"),
    [
        pytest.param({"Last-Event-ID": "x"}, "", id="header-not-a-number"),
        pytest.param({}, "?after=-1", id="negative"),
        pytest.param({"Last-Event-ID": b"\xb2"}, "", id="header-superscript-two"),
        pytest.param({}, "?after=%C2%B2", id="query-superscript-two"),
        pytest.param({}, "?after=" + "9" * 5000, id="query-5000-digits"),
    ],
)
async def test_a_bad_resume_point_is_400(
    api: Api, headers: dict[str, str | bytes], query: str
) -> None:
    run_id = await start_run(api)
    response = await api.alice.client.get(f"/api/runs/{run_id}/events{query}", headers=headers)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_request"


async def test_the_stream_follows_live_events_with_pings(api: Api) -> None:
    run_id = await start_run(api)
    frames: list[SseFrame] = []
    with anyio.fail_after(20):
        async with api.alice.client.stream("GET", f"/api/runs/{run_id}/events") as response:
            stream = sse_frames(response)
            first = await anext(stream)
            while first.comment != "ping":  # nothing happened yet: only heartbeats
                first = await anext(stream)
            await emit(api, run_id, {"type": "run_started"})
            await emit(api, run_id, *texts(2))
            await emit(api, run_id, FINISHED)
            frames = [frame async for frame in stream if frame.comment is None]
    assert [frame.id for frame in frames] == [1, 2, 3, 4]
    assert frames[-1].event == "run_finished"


async def test_a_client_that_leaves_releases_its_subscription(api: Api) -> None:
    run_id = await start_run(api)
    channel = events_channel(run_id)
    with anyio.fail_after(20):
        async with api.alice.client.stream("GET", f"/api/runs/{run_id}/events") as response:
            # Keep the reader: a dropped async generator is closed by the event loop soon
            # after, and closing it closes the response (the server saw a client leave).
            frames = sse_frames(response)
            await anext(frames)
            subscribed = await api.redis.pubsub_numsub(channel)
        while (await api.redis.pubsub_numsub(channel))[0][1] != 0:
            await anyio.sleep(0.05)
    assert subscribed[0][1] == 1


async def test_another_users_run_is_404_on_every_endpoint(api: Api) -> None:
    run_id = await start_run(api)
    bob = api.bob.client
    read = await bob.get(f"/api/runs/{run_id}")
    events = await bob.get(f"/api/runs/{run_id}/events")
    cancel = await bob.post(f"/api/runs/{run_id}/cancel")
    assert [r.status_code for r in (read, events, cancel)] == [404, 404, 404]
    assert {r.json()["error"]["code"] for r in (read, events, cancel)} == {"not_found"}
    run = api.store.get_run(run_id)
    assert run is not None
    assert (run.status, run.cancel_requested) == ("queued", False)


@pytest.mark.parametrize(
    ("method", "suffix"),
    [
        pytest.param("GET", "", id="read"),
        pytest.param("GET", "/events", id="events"),
        pytest.param("POST", "/cancel", id="cancel"),
    ],
)
async def test_runs_need_a_user(api: Api, method: str, suffix: str) -> None:
    run_id = await start_run(api)
    response = await api.anonymous.request(method, f"/api/runs/{run_id}{suffix}")
    assert response.status_code == 401
