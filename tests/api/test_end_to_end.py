"""kiln end to end through HTTP: real Redis, workers, Docker sandboxes and uvicorn on loopback.

The replay provider plays test recordings (``tests/api/stack.py``): the todo app (a vite-react
sandbox, an install and a build), a greeting, and a long conversational answer; ``slow-*``
names are paced so that cancels and reconnects happen while the run streams.
"""

from __future__ import annotations

import random
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
import pytest

from tests.api.harness import Person, SseFrame, add_person, sse_frames
from tests.api.stack import LiveService
from tests.end_to_end import EndToEnd

pytestmark = [pytest.mark.anyio, pytest.mark.docker, pytest.mark.slow, pytest.mark.npm]

SECRET = "end-to-end-secret-0123456789"
TODO_FILES = {
    "src/store.js",
    "src/components/TodoInput.jsx",
    "src/components/TodoItem.jsx",
    "src/App.jsx",
    "src/index.css",
    "README.md",
}
CONCURRENT_RUNS = 20
END_TO_END = EndToEnd("api", 4, SECRET, worker_concurrency=24)  # twenty runs at once


def person(live: LiveService, name: str) -> Person:
    return add_person(live.stack.store, f"{name}-{secrets.token_hex(3)}", live.url)


async def new_chat(who: Person) -> str:
    response = await who.client.post("/api/chats", json={"title": "e2e"})
    assert response.status_code == 201
    chat_id: str = response.json()["chat"]["id"]
    return chat_id


async def post(
    who: Person, chat_id: str, model: str, template: str | None = None
) -> httpx.Response:
    message = {"content": "make it", "model": model}
    if template is not None:
        message["template"] = template
    return await who.client.post(f"/api/chats/{chat_id}/messages", json=message)


async def start(who: Person, model: str, template: str | None = None) -> str:
    response = await post(who, await new_chat(who), model, template)
    assert response.status_code == 202, response.text
    run_id: str = response.json()["run_id"]
    return run_id


async def follow(
    who: Person, run_id: str, after: int = 0, limit: int | None = None
) -> list[SseFrame]:
    """The events after ``after`` until ``run_finished`` (or ``limit`` events)."""
    frames: list[SseFrame] = []
    headers = {"Last-Event-ID": str(after)} if after else {}
    with anyio.fail_after(240):
        async with who.client.stream(
            "GET", f"/api/runs/{run_id}/events", headers=headers
        ) as response:
            assert response.status_code == 200
            async for frame in sse_frames(response):
                if frame.comment is None:
                    frames.append(frame)
                if len(frames) == limit:
                    break
    return frames


@dataclass
class BuiltApp:
    """Alice's completed todo-app run."""

    alice: Person
    chat_id: str
    run_id: str
    run: dict[str, Any]
    events: list[SseFrame]


@pytest.fixture(scope="module")
async def built(live: LiveService) -> AsyncIterator[BuiltApp]:
    alice = person(live, "alice")
    chat_id = await new_chat(alice)
    posted = await post(alice, chat_id, "todo")
    assert posted.status_code == 202, posted.text
    run_id = posted.json()["run_id"]
    events = await follow(alice, run_id)
    run = (await alice.client.get(f"/api/runs/{run_id}")).json()
    yield BuiltApp(alice, chat_id, run_id, run, events)
    await alice.client.aclose()


async def test_a_message_becomes_an_app_in_a_sandbox(built: BuiltApp) -> None:
    events, run = built.events, built.run
    assert events[0].event == "run_started"
    assert events[-1].event == "run_finished"
    assert events[-1].data == {
        "type": "run_finished",
        "status": "completed",
        "stop_reason": "code_written",
    }
    assert [frame.id for frame in events] == list(range(1, len(events) + 1))
    assert run["status"] == "completed"
    assert run["preview_url"] == f"http://{run['sandbox_id']}.preview.kiln.localhost:8000/"
    written = {
        frame.data["path"] for frame in events if frame.event == "file_written" and frame.data
    }
    assert written >= TODO_FILES


async def test_the_files_are_in_the_sandbox(built: BuiltApp) -> None:
    client, sandbox = built.alice.client, built.run["sandbox_id"]
    listing = await client.get(f"/api/sandboxes/{sandbox}/files")
    paths = {item["path"] for item in listing.json()["files"]}
    assert paths >= TODO_FILES
    assert not any(path.startswith(("node_modules/", "dist/")) for path in paths)
    store = await client.get(f"/api/sandboxes/{sandbox}/files/src/store.js")
    assert store.status_code == 200
    assert "zustand" in store.text
    chat = (await client.get(f"/api/chats/{built.chat_id}")).json()
    assert [message["role"] for message in chat["messages"]] == ["user", "assistant"]
    assert chat["chat"]["sandbox_id"] == sandbox


async def test_the_owner_sees_the_preview(built: BuiltApp, live: LiveService) -> None:
    host = f"{built.run['sandbox_id']}.preview.kiln.localhost:8000"
    with anyio.fail_after(120):
        while True:
            page = await built.alice.client.get("/", headers={"Host": host, "Accept": "*/*"})
            if page.status_code != 503:  # the dev server may still be starting
                break
            await anyio.sleep(1)
    assert page.status_code == 200
    assert 'id="root"' in page.text


async def test_nobody_else_reaches_anything_of_it(built: BuiltApp, live: LiveService) -> None:
    bob = person(live, "bob")
    chat, run, sandbox = built.chat_id, built.run_id, built.run["sandbox_id"]
    answers = [
        await bob.client.get(f"/api/chats/{chat}"),
        await bob.client.post(f"/api/chats/{chat}/messages", json={"content": "mine"}),
        await bob.client.get(f"/api/runs/{run}"),
        await bob.client.get(f"/api/runs/{run}/events"),
        await bob.client.post(f"/api/runs/{run}/cancel"),
        await bob.client.get(f"/api/sandboxes/{sandbox}/files"),
        await bob.client.get(f"/api/sandboxes/{sandbox}/files/src/App.jsx"),
        await bob.client.post(f"/api/sandboxes/{sandbox}/preview-login"),
        await bob.client.get("/", headers={"Host": f"{sandbox}.preview.kiln.localhost:8000"}),
    ]
    assert [answer.status_code for answer in answers] == [404] * len(answers)
    assert (await bob.client.get("/api/chats")).json() == {"chats": []}
    messages = (await built.alice.client.get(f"/api/chats/{chat}")).json()["messages"]
    assert len(messages) == 2
    await bob.client.aclose()


async def test_reconnecting_at_random_points_loses_and_repeats_nothing(live: LiveService) -> None:
    carol = person(live, "carol")
    run_id = await start(carol, "slow-long")
    rng = random.Random(5)
    pieces: list[SseFrame] = []
    reconnects = 0
    while not pieces or pieces[-1].event != "run_finished":
        after = pieces[-1].id or 0 if pieces else 0
        pieces += await follow(carol, run_id, after, limit=rng.randint(1, 4))
        reconnects += 1
    whole = await follow(carol, run_id)
    assert reconnects > 3
    assert [frame.id for frame in pieces] == list(range(1, len(whole) + 1))
    assert pieces == whole
    await carol.client.aclose()


async def test_cancelling_mid_stream_ends_the_run_cancelled(live: LiveService) -> None:
    dave = person(live, "dave")
    run_id = await start(dave, "slow-long")
    seen = await follow(dave, run_id, limit=3)
    cancel = await dave.client.post(f"/api/runs/{run_id}/cancel")
    assert cancel.status_code == 202
    rest = await follow(dave, run_id, after=seen[-1].id or 0)
    assert rest[-1].event == "run_finished"
    assert rest[-1].data is not None
    assert rest[-1].data["status"] == "cancelled"
    run = (await dave.client.get(f"/api/runs/{run_id}")).json()
    assert run["status"] == "cancelled"
    text = "".join(f.data["content"] for f in seen + rest if f.event == "text" and f.data)
    assert "Line 119" not in text  # it really stopped before the end
    await dave.client.aclose()


async def test_admission_limits_answer_429_naming_the_limit(live: LiveService) -> None:
    erin = person(live, "erin")
    first_chat, second_chat = await new_chat(erin), await new_chat(erin)
    first = await post(erin, first_chat, "slow-long")
    same_chat = await post(erin, first_chat, "slow-long")
    second = await post(erin, second_chat, "slow-long")
    third = await post(erin, await new_chat(erin), "slow-long")
    assert [r.status_code for r in (first, same_chat, second, third)] == [202, 429, 202, 429]
    assert same_chat.json()["error"]["limit"] == "chat"
    assert third.json()["error"]["limit"] == "user"
    assert third.json()["error"]["code"] == "admission_refused"
    for response in (first, second):
        await erin.client.post(f"/api/runs/{response.json()['run_id']}/cancel")
        await follow(erin, response.json()["run_id"])
    again = await post(erin, first_chat, "hello")
    assert again.status_code == 202  # the slots were released
    await follow(erin, again.json()["run_id"])
    await erin.client.aclose()


async def test_twenty_concurrent_runs_all_complete(live: LiveService) -> None:
    people = [person(live, f"user{n}") for n in range(CONCURRENT_RUNS)]
    endings: dict[str, dict[str, Any] | None] = {}

    async def one(who: Person) -> None:
        # vanilla: each run's early sandbox is the lightest (twenty Vite dev servers starting
        # were most of the test's CPU); the concurrency is what is tested
        run_id = await start(who, "hello", "vanilla")
        frames = await follow(who, run_id)
        endings[run_id] = frames[-1].data

    async with anyio.create_task_group() as tasks:
        for who in people:
            tasks.start_soon(one, who)
    assert len(endings) == CONCURRENT_RUNS
    assert all(end is not None and end["status"] == "completed" for end in endings.values())
    for who in people:
        await who.client.aclose()
